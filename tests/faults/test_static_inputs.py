"""Bad inputs to the static commands (``callgraph``, ``find``): each is reported in one line
and the rest analysed, or refused with one line that says what to try.

Every case runs the real CLI in a subprocess on real files (FIFOs, symlinks, modes) and
compares whole outputs: the output with a fault is the output without it, plus one warning.
The table of these cases and what each gets is in docs/robustness.md ("Static commands").
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.faults.static_support import PROGRAM, Run, sgtrace_cli, write_program


@pytest.fixture
def program(tmp_path: Path) -> Path:
    return write_program(tmp_path / "src")


def callgraph(root: Path, *args: str | Path) -> Run:
    return sgtrace_cli("callgraph", *args, "--source", root, "--no-cache")


# -- files that cannot be read: one warning each, the rest analysed -----------------------------
def fifo(root: Path) -> str:
    os.mkfifo(root / "app" / "pipe.py")
    return "app/pipe.py: a FIFO (named pipe), not a regular file, left out"


def dangling_symlink(root: Path) -> str:
    (root / "app" / "gone.py").symlink_to("removed.py")
    return "app/gone.py: a dangling symlink (-> removed.py), left out"


def symlink_loop(root: Path) -> str:
    (root / "app" / "loop.py").symlink_to("loop.py")
    return "app/loop.py: a symlink loop (-> loop.py), left out"


def folder_symlink_loop(root: Path) -> str:
    (root / "app" / "again").symlink_to(root / "app")
    return f"app/again/: a symlink loop (-> {root / 'app'}, a folder above it), left out"


def unreadable(root: Path) -> str:
    if os.geteuid() == 0:
        pytest.skip("root reads files whatever their mode; run the suite as a user")
    path = root / "app" / "secret.py"
    path.write_text("def clean(x):\n    return x\n", encoding="utf-8")
    path.chmod(0)
    return "app/secret.py: unreadable (permission denied), left out; check its mode and owner"


def unlistable_folder(root: Path) -> str:
    if os.geteuid() == 0:
        pytest.skip("root lists folders whatever their mode; run the suite as a user")
    folder = root / "app" / "private"
    folder.mkdir()
    (folder / "mod.py").write_text("def clean(x):\n    return x\n", encoding="utf-8")
    folder.chmod(0)
    return "app/private/: folder not listed (Permission denied), its modules left out"


def top_level_fifo(root: Path) -> str:
    os.mkfifo(root / "tool.py")
    return "tool.py: a FIFO (named pipe), not a regular file, left out"


FAULTS: dict[str, Callable[[Path], str]] = {
    f.__name__: f
    for f in (
        fifo,
        dangling_symlink,
        symlink_loop,
        folder_symlink_loop,
        unreadable,
        unlistable_folder,
        top_level_fifo,
    )
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize(
    "command",
    [
        ("callgraph", "app", "--format", "json"),
        ("callgraph", "--focus", "load", "--format", "text"),
        ("find", "clean"),
    ],
    ids=["callgraph-package", "callgraph-focus", "find"],
)
def test_unreadable_file_is_one_warning_and_the_rest_is_analysed(
    program: Path, fault: str, command: tuple[str, ...]
) -> None:
    args = (*command, "--source", program, "--no-cache")
    clean = sgtrace_cli(*args)
    assert (clean.code, clean.stderr) == (0, "")
    warning = FAULTS[fault](program)
    faulty = sgtrace_cli(*args)
    assert faulty == Run(0, clean.stdout, f"warning: skipped {warning}\n")


# -- symlinked subpackages are analysed ----------------------------------------------------------
PLUGIN = {"mod.py": "from app.util import clean\n\n\ndef run(x):\n    return clean(x)\n"}


def test_symlinked_subpackage_is_analysed_like_a_copy(tmp_path: Path) -> None:
    copied = write_program(
        tmp_path / "copied", {**PROGRAM, **{f"app/plugin/{k}": v for k, v in PLUGIN.items()}}
    )
    linked = write_program(tmp_path / "linked")
    outside = write_program(tmp_path / "elsewhere" / "plugin", PLUGIN)
    (linked / "app" / "plugin").symlink_to(outside, target_is_directory=True)
    runs = {
        root: callgraph(root, "app.plugin.mod", "--format", "text") for root in (copied, linked)
    }
    expected = """\
# dir:{root}; files under app/
<module>  plugin/mod.py:1
run  plugin/mod.py:4
  5: clean  [import]  (util.py:1)
# 1 resolved call sites; 0 unresolved
# N: Name  [how]  (file:line): Name, defined at file:line, is called on line N
#   [import]  through an import (re-exports included)
"""
    assert runs == {root: Run(0, expected.format(root=root), "") for root in (copied, linked)}
