"""Helpers of the runtime fault tests: release copies, pip-like upgrades, killed writes.

Run as a program (``python runtime_support.py write|revert ROOT STOP_AT``), it writes or reverts
the patch in ROOT and, at filesystem operation STOP_AT, prints ``stopped at N`` and waits to be
killed: the test then sends a real SIGKILL.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import sgtrace
from sgtrace.graphs.source import SourceTree, open_source
from sgtrace.hooks.apply import OS_FILE_OPS, patch_source
from sgtrace.hooks.patch_record import PatchResult
from sgtrace.payload.policy import PolicyConfig, PolicyKind

POLICY = PolicyConfig(preset="batch-size", kind=PolicyKind.THRESHOLD, acceptance_gate=False)
SRC = Path(sgtrace.__file__).resolve().parents[1]


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root``: its bytes and mode."""
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def differences(
    actual: dict[str, tuple[bytes, int]], expected: dict[str, tuple[bytes, int]]
) -> list[str]:
    """What differs between two snapshots, one line a path: ``+`` only in ``actual``, ``-`` only
    in ``expected``, ``~`` other bytes or mode. Empty when they are the same."""
    lines = [f"+ {p}" for p in sorted(actual.keys() - expected.keys())]
    lines += [f"- {p}" for p in sorted(expected.keys() - actual.keys())]
    lines += [f"~ {p}" for p in sorted(actual.keys() & expected.keys()) if actual[p] != expected[p]]
    return lines


def release_copy(release: SourceTree, dest: Path) -> SourceTree:
    """A copy of a cached release's ``sglang`` package in ``dest``, opened as a directory."""
    shutil.copytree(release.root / "sglang", dest / "sglang")
    return open_source(dest)


def pip_upgrade(old: SourceTree, new: SourceTree, installed: Path) -> None:
    """What ``pip install -U`` does to ``installed``: delete every file of the old release,
    then copy in the new one; files it never installed (sgtrace's) stay."""
    for path in sorted((old.root / "sglang").rglob("*")):
        if path.is_file():
            (installed / path.relative_to(old.root)).unlink(missing_ok=True)
    shutil.copytree(new.root / "sglang", installed / "sglang", dirs_exist_ok=True)


class Killed(BaseException):
    """Stands for SIGKILL: raised at one filesystem operation, and at every one after it, so
    that no cleanup runs (``except BaseException`` handlers included)."""


@dataclass
class StoppingOps:
    """Real filesystem operations that stop for good at operation ``stop_at`` (1-based).

    Stopped in ``write_temp``, it leaves half the data in a temporary file, as a process killed
    while writing would.
    """

    stop_at: int
    calls: int = 0
    log: list[str] = field(default_factory=list)

    def _next(self, what: str) -> bool:
        self.calls += 1
        self.log.append(what)
        if self.calls > self.stop_at:
            raise Killed(f"already stopped at operation {self.stop_at}")
        return self.calls == self.stop_at

    def write_temp(self, beside: Path, data: bytes, mode: int) -> Path:
        if self._next(f"write_temp {beside.name}"):
            fd, _name = tempfile.mkstemp(prefix=f".{beside.name}.sgtrace-tmp.", dir=beside.parent)
            os.write(fd, data[: len(data) // 2])
            os.close(fd)
            raise Killed(f"stopped writing a temporary file beside {beside}")
        return OS_FILE_OPS.write_temp(beside, data, mode)

    def replace(self, source: Path, target: Path) -> None:
        if self._next(f"replace {target.name}"):
            raise Killed(f"stopped before replacing {target}")
        OS_FILE_OPS.replace(source, target)

    def unlink(self, path: Path) -> None:
        if self._next(f"unlink {path.name}"):
            raise Killed(f"stopped before deleting {path}")
        OS_FILE_OPS.unlink(path)


@dataclass
class PausingOps(StoppingOps):
    """Stops at operation ``stop_at`` by printing ``stopped at N`` and sleeping until killed."""

    def _next(self, what: str) -> bool:
        self.calls += 1
        if self.calls == self.stop_at:
            print(f"stopped at {self.calls}: {what}", flush=True)
            time.sleep(600)
        return False


def temp_files(root: Path) -> list[str]:
    """Temporary files of sgtrace's writes under ``root``."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob(".*.sgtrace-tmp.*"))


def start_paused(action: str, root: Path, stop_at: int) -> subprocess.Popen[str]:
    """This file as a program: ``action`` (write or revert) in ``root``, pausing at ``stop_at``."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.Popen(
        [sys.executable, __file__, action, str(root), str(stop_at)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def run(action: str, root: Path, stop_at: int) -> PatchResult:
    ops = PausingOps(stop_at) if stop_at else OS_FILE_OPS
    tree = open_source(root)
    return patch_source(tree, POLICY, write=action == "write", revert=action == "revert", ops=ops)


if __name__ == "__main__":
    result = run(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]))
    print(result.status.value, flush=True)


def insert_line(path: Path, number: int, line: bytes) -> None:
    """Put ``line`` into the file at ``path`` so that it becomes line ``number``."""
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join([*lines[: number - 1], line, *lines[number - 1 :]]))
