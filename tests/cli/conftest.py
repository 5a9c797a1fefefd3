"""The small program of our own that the CLI tests run ``sgtrace`` on."""

from __future__ import annotations

from pathlib import Path

import pytest

PROGRAM = {
    "app/__init__.py": "",
    "app/sub/__init__.py": "",
    "app/pipeline.py": """\
from app.util import clean


def load(path):
    return parse(path)


def parse(path):
    return clean(path)


def main():
    load("x")
    len("x")
""",
    "app/util.py": "def clean(text):\n    return text.strip()\n",
    "app/sub/util.py": "def clean(text):\n    return text\n",
}


@pytest.fixture
def program(tmp_path: Path) -> Path:
    """The program above under ``tmp_path/src``; returns that folder (resolved)."""
    root = tmp_path / "src"
    for rel, text in PROGRAM.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root.resolve()
