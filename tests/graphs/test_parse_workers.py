"""Parse workers die with the run that started them.

A real run is started in a child process, its parse pool is seen at work, the run is killed
with SIGKILL (no clean-up of its own can run), and every worker must be gone soon after.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
MODULES = 48
RUN = """
import sys
from pathlib import Path
from sgtrace.graphs.build import Project
from sgtrace.graphs.source import open_source

project = Project(open_source(Path(sys.argv[1])), Path(sys.argv[2]))
project.index.jobs = 2
project.index.load([m for m in project.index.modules if m.startswith("app.")])
"""
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def write_program(root: Path) -> None:
    """Modules big enough that summarising them all takes the pool a few seconds."""
    (root / "app").mkdir(parents=True)
    (root / "app" / "__init__.py").write_text("")
    body = "".join(
        f"def f{n}(x):\n    if x > {n}:\n        return g(x, {n}) + h(x)\n    return f{n + 1}(x)\n\n\n"
        for n in range(600)
    )
    for n in range(MODULES):
        (root / "app" / f"m{n}.py").write_text(body)


def children(pid: int) -> set[int]:
    found = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        text = (task / "children").read_text() if (task / "children").exists() else ""
        found.update(int(c) for c in text.split())
    return found


def is_running(pid: int) -> bool:
    """Alive and not a zombie (a re-parented zombie waits for a reaper, but holds nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_until(condition, limit_s: float) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_killed_run_leaves_no_parse_workers(tmp_path: Path) -> None:
    write_program(tmp_path / "src")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    run = subprocess.Popen(
        [sys.executable, "-c", RUN, str(tmp_path / "src"), str(tmp_path / "cache")], env=env
    )
    workers: set[int] = set()
    try:
        assert wait_until(lambda: len(children(run.pid)) >= 2, 60), "the pool never started"
        workers = children(run.pid)
        assert all(is_running(w) for w in workers)
        run.send_signal(signal.SIGKILL)
        run.wait()
        gone = wait_until(lambda: not any(is_running(w) for w in workers), 20)
        left = sorted(w for w in workers if is_running(w))
        assert gone, f"parse workers {left} outlived their killed parent"
    finally:
        run.kill()
        for worker in workers:  # a failed run of this test leaves nothing behind either
            if is_running(worker):
                os.kill(worker, signal.SIGKILL)


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_workers_started_by_other_start_methods_work(tmp_path: Path, method: str) -> None:
    """Under ``spawn`` and ``forkserver`` (Python 3.14's default on Linux) a worker's parent
    is not always the process that made the pool; the watch must not end them early."""
    root = tmp_path / "src"
    (root / "app").mkdir(parents=True)
    (root / "app" / "__init__.py").write_text("")
    for n in range(20):
        (root / "app" / f"m{n}.py").write_text(f"def f{n}():\n    g()\n")
    script = (
        "import multiprocessing, sys\n"
        "if __name__ == '__main__':\n"
        f"    multiprocessing.set_start_method({method!r})\n"
        + "\n".join("    " + line for line in RUN.strip().splitlines())
        + "\n    print(sum(not s.is_outline for s in project.index.loaded.values()))\n"
    )
    (tmp_path / "run.py").write_text(script)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, str(tmp_path / "run.py"), str(root), str(tmp_path / "cache")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "20\n", "")
