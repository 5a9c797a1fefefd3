"""Run one command as a child process and measure its wall time, CPU time and peak memory.

Memory is read from ``/proc`` every ``SAMPLE_S`` seconds while the command runs, over the
child and all its descendants (the engine parses in a process pool):

* peak MiB: the largest sum of ``VmRSS`` over the tree seen in one sample (pool workers alive
  side by side add up; pages shared copy-on-write after ``fork`` count once per process, so
  it errs high);
* largest process MiB: the largest ``VmHWM`` (a process's own high-water mark, exact for the
  time up to its last sample), and ``ru_maxrss`` from ``os.wait4`` where that says more.

``ru_maxrss`` alone would mislead: Linux starts a child's value at its parent's resident size
when it forks, so a short command run from a big harness reports the harness's size. It is
used only when it exceeds what this process held when the command started.

A run ends as :class:`Outcome` ``OK``, ``FAILED`` (non-zero exit), ``TIMEOUT`` or
``MEMORY`` (the tree went over the memory cap and was killed); a limit is never silent.

>>> m = measure(["true"], Limits(timeout_s=10, memory_cap_mib=1024))
>>> m.outcome
<Outcome.OK: 'ok'>
"""

from __future__ import annotations

import enum
import os
import resource
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SAMPLE_S = 0.05
TAIL_LINES = 25


class Outcome(enum.Enum):
    """How a measured command ended."""

    OK = "ok"
    FAILED = "crash"
    TIMEOUT = "timeout"
    MEMORY = "over memory cap"


@dataclass(frozen=True)
class Limits:
    """Wall-clock limit and memory cap (MiB, whole process tree) for one command."""

    timeout_s: float
    memory_cap_mib: float


@dataclass(frozen=True)
class Measurement:
    """What one run cost: wall and CPU seconds, peak MiB, how it ended, and the end of its stderr."""

    outcome: Outcome
    wall_s: float
    cpu_s: float  # user + system, the child and the descendants it reaped
    peak_mib: float
    largest_process_mib: float
    returncode: int | None
    stderr_tail: str


def measure(command: list[str], limits: Limits, cwd: Path | None = None) -> Measurement:
    """Run ``command`` (stdout discarded, stderr kept) and measure it under ``limits``."""
    own_mib = process_memory_mib(os.getpid()).high_water
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
        )
        try:
            status, usage, seen, outcome = _watch(proc.pid, limits, start)
        finally:
            _kill_group(proc.pid)  # leftovers (orphaned pool workers), or all on an interrupt
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = "\n".join(err.read().decode("utf-8", "replace").splitlines()[-TAIL_LINES:])
    maxrss = usage.ru_maxrss / 1024  # Linux reports KiB
    largest = max(seen.high_water, maxrss if maxrss > own_mib else 0.0)
    if outcome is None:
        outcome = Outcome.OK if proc.returncode == 0 else Outcome.FAILED
    return Measurement(
        outcome,
        wall,
        usage.ru_utime + usage.ru_stime,
        max(seen.resident, largest),
        largest,
        proc.returncode,
        tail,
    )


@dataclass(frozen=True)
class Memory:
    """Resident MiB now and the high-water MiB (of one process, or summed/maxed over a tree)."""

    resident: float
    high_water: float


def _watch(
    pid: int, limits: Limits, start: float
) -> tuple[int, resource.struct_rusage, Memory, Outcome | None]:
    """Sample the tree until ``pid`` exits; kill its group at a limit. Returns wait4's result,
    the peak tree sum and largest high-water mark seen, and the limit hit (``None`` if none)."""
    peak = Memory(0.0, 0.0)
    outcome: Outcome | None = None
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return status, usage, peak, outcome
        now = tree_memory_mib(pid)
        peak = Memory(max(peak.resident, now.resident), max(peak.high_water, now.high_water))
        if outcome is None and time.perf_counter() - start > limits.timeout_s:
            outcome = Outcome.TIMEOUT
            _kill_group(pid)
        elif outcome is None and peak.resident > limits.memory_cap_mib:
            outcome = Outcome.MEMORY
            _kill_group(pid)
        time.sleep(SAMPLE_S)


def tree_memory_mib(root: int) -> Memory:
    """``VmRSS`` summed and ``VmHWM`` maxed over ``root`` and its descendants, in MiB.

    Walks ``/proc/PID/task/TID/children`` (cheap: only the tree is read, not all of /proc).
    A process that is gone (or a zombie, which has no memory) counts 0.
    """
    resident = high_water = 0.0
    todo = [root]
    while todo:
        pid = todo.pop()
        one = process_memory_mib(pid)
        resident += one.resident
        high_water = max(high_water, one.high_water)
        try:
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:  # the process ended while it was being read
            pass
    return Memory(resident, high_water)


def process_memory_mib(pid: int) -> Memory:
    """``VmRSS`` and ``VmHWM`` of one process from ``/proc/PID/status`` (0 if unreadable)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return Memory(0.0, 0.0)
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)

    def mib(key: str) -> float:
        return int(fields.get(key, "0 kB").split()[0]) / 1024

    return Memory(mib("VmRSS"), mib("VmHWM"))


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
