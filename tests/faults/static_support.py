"""Helpers of the static fault suite: a small program on disk and the real CLI in a subprocess.

The CLI runs as its own process (``python -c 'from sgtrace.cli import main; main()'``), with a
timeout, so that a hang (a FIFO read) fails the test instead of stalling the suite, and stdout
and stderr are what a user's terminal gets.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import sgtrace

SRC = Path(sgtrace.__file__).resolve().parents[1]  # the sgtrace under test, first on the path
TIMEOUT_S = 60

PROGRAM = {
    "app/__init__.py": "",
    "app/pipeline.py": (
        "from app.util import clean\n\n\ndef load(path):\n    return clean(path)\n"
    ),
    "app/util.py": "def clean(text):\n    return text.strip()\n",
}


@dataclass(frozen=True)
class Run:
    """What one CLI run printed and returned."""

    code: int
    stdout: str
    stderr: str


def write_program(root: Path, files: dict[str, str] = PROGRAM) -> Path:
    """``files`` under ``root`` (made); returns ``root`` resolved."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root.resolve()


def sgtrace_cli(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> Run:
    """``sgtrace ARGS`` in a subprocess; a run past :data:`TIMEOUT_S` fails the test."""
    environ = {**os.environ, **(env or {}), "PYTHONPATH": str(SRC)}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", "from sgtrace.cli import main; main()", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            cwd=cwd,
            env=environ,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"sgtrace {' '.join(map(str, args))} hung ({TIMEOUT_S} s)") from exc
    return Run(proc.returncode, proc.stdout, proc.stderr)
