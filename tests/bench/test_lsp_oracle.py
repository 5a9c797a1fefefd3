"""bench/lsp_oracle.py asks a real basedpyright for the callees of a small package's calls."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = """\
class Pool:
    @property
    def size(self):
        return 1

    def take(self):
        return helper()


def helper():
    return 0


def run():
    pool = Pool()
    pool.take()
    return pool.size + len([])
"""


@pytest.mark.skipif(
    shutil.which("basedpyright-langserver") is None, reason="basedpyright is not installed"
)
def test_callees_of_calls_in_functions_only(tmp_path: Path, monkeypatch) -> None:
    """Calls reach functions and classes inside the root; a property read is no call, and
    ``len`` lies outside the root."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "app" / "pool.py").write_text(SOURCE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    lsp_oracle = importlib.import_module("lsp_oracle")
    found = lsp_oracle.ask_basedpyright(tmp_path, "app/pool.py")
    assert [(c.line, c.name, c.is_class) for c in found] == [
        (7, "app.pool:helper", False),
        (15, "app.pool:Pool", True),
        (16, "app.pool:Pool.take", False),
    ]
