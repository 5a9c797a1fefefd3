"""Where docs/ lives, and how docs/build.py runs sgtrace: the installed ``sgtrace`` command, in a
subprocess from the repository root, so that what a page shows is what that command prints."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"


class DocsBuildError(RuntimeError):
    """A generator step could not run (sgtrace or Graphviz failed); the message says which."""


def sgtrace_executable() -> str:
    """The ``sgtrace`` console script of this Python's environment."""
    beside = Path(sys.executable).with_name("sgtrace")
    found = str(beside) if beside.is_file() else shutil.which("sgtrace")
    if found is None:
        raise DocsBuildError("the sgtrace command is not installed here; run `pip install -e .`")
    return found


def run_sgtrace(argv: Sequence[str]) -> str:
    """stdout of ``sgtrace ARGV`` run from the repository root; an error with stderr if it fails."""
    proc = subprocess.run(
        [sgtrace_executable(), *argv], cwd=REPO, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise DocsBuildError(
            f"`{shlex.join(['sgtrace', *argv])}` exited {proc.returncode}:\n{proc.stderr.strip()}"
        )
    return proc.stdout
