"""The executables a benchmark runs: where they are, their versions, their bytecode."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


def without_home(path: Path) -> str:
    """``path`` with the home folder written ``~``: results name no machine's user."""
    home = Path.home()
    return f"~/{path.relative_to(home).as_posix()}" if path.is_relative_to(home) else str(path)


def tool_version(executable: Path, distribution: str) -> str:
    """The installed version of ``distribution`` in the venv that holds ``executable``."""
    python = executable.parent / "python"
    code = f"import importlib.metadata as m; print(m.version({distribution!r}))"
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    return proc.stdout.strip() or "unknown"


def compile_bytecode(executable: Path) -> None:
    """Write the bytecode of the ``sgtrace`` package that ``executable`` runs. An editable
    install keeps its modules in the source tree; with ``PYTHONDONTWRITEBYTECODE`` set (as in
    some CI images), every run would compile each module it imports again, which no installed
    release does (pip writes the bytecode at install time)."""
    python = executable.parent / "python"
    code = (
        "import compileall, os, sgtrace; "
        "compileall.compile_dir(os.path.dirname(sgtrace.__file__), quiet=1)"
    )
    subprocess.run([str(python), "-c", code], capture_output=True, check=False)


def find_sgtrace() -> Path:
    """The ``sgtrace`` script next to this Python, else the one on PATH."""
    sibling = Path(sys.executable).parent / "sgtrace"
    found = sibling if sibling.exists() else shutil.which("sgtrace")
    if found is None:
        raise SystemExit("sgtrace is not installed in this environment: pip install -e .")
    return Path(found)
