"""Fixtures of the tracer tests: the fakeserve programs, other Pythons, traced runs.

``programs/fakeserve`` is a miniature of SGLang's speculative decode path (see its docstring);
``run_fakeserve`` runs it under ``run_traced`` in real processes: one scheduler per TP rank,
spawned, then killed by SIGKILL.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sgtrace.names import QualName
from sgtrace.tracer.events import Backend, Role
from sgtrace.tracer.launch import DeepDive, TraceRun, run_traced
from sgtrace.tracer.load import Trace, load_trace
from sgtrace.tracer.selection import Selection, default_selection

PROGRAMS = Path(__file__).parent / "programs"
_W = "fakeserve.workers"
_S = "fakeserve.scheduler"
FAKESERVE_NAMES: Mapping[Role, tuple[QualName, ...]] = {
    Role.STEP: (QualName(_S, "Scheduler.run_batch"),),
    Role.DECODE_RESULT: (QualName(_S, "BatchResultProcessor.process_batch_result_decode"),),
    Role.SPEC_FORWARD: (QualName(_W, "SpecWorker.forward_batch_generation"),),
    Role.DRAFT: (QualName(_W, "DraftWorker.draft"),),
    Role.DRAFT_FORWARD: (QualName(_W, "DraftWorker.draft_forward"),),
    Role.VERIFY: (QualName(_W, "SpecWorker.verify"),),
    Role.DRAFT_EXTEND_PREFILL: (QualName(_W, "DraftWorker._draft_extend_for_prefill"),),
    Role.DRAFT_EXTEND_DECODE: (QualName(_W, "DraftWorker._draft_extend_for_decode"),),
    Role.TARGET_FORWARD: (QualName(_W, "TargetWorker.forward_batch_generation"),),
    Role.DECISION: (QualName("sgtrace_hook", "record_decision"),),
    Role.OTHER: (QualName(_S, "Scheduler.wait_for_requests"),),
}


def fakeserve_selection() -> Selection:
    """The fakeserve counterpart of SGLang's default selection, plus the idle wait."""
    return default_selection(FAKESERVE_NAMES)


def _runs(python: str, minimum: tuple[int, int]) -> bool:
    check = f"import sys; sys.exit(sys.version_info[:2] < {minimum!r})"
    try:
        return subprocess.run([python, "-c", check], capture_output=True, timeout=30).returncode == 0
    except OSError:
        return False


def find_python(minimum: tuple[int, int]) -> str | None:
    """A Python at least ``minimum``: this one, one on PATH, or one under pyenv."""
    if sys.version_info[:2] >= minimum:
        return sys.executable
    names = [f"python3.{minor}" for minor in range(minimum[1], 16)]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [str(p) for p in sorted(pyenv.glob("3.*/bin/python")) if pyenv.is_dir()]
    for candidate in [*names, *candidates]:
        if _runs(candidate, minimum):
            return candidate
    return None


def has_module(python: str, module: str) -> bool:
    check = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([python, "-c", check], capture_output=True, timeout=30).returncode == 0


@pytest.fixture(scope="session")
def python312() -> str:
    """A Python with ``sys.monitoring``; the test is skipped where there is none."""
    python = find_python((3, 12))
    if python is None:
        pytest.skip("no Python 3.12+ found (PATH, pyenv) for the sys.monitoring backend")
    return python


@dataclass
class FakeRun:
    """A traced fakeserve run: what ``run_traced`` returned, the trace, the command's output."""

    run: TraceRun
    trace: Trace
    stdout: str
    stderr: str
    command: list[str] = field(default_factory=list)

    def __str__(self) -> str:  # shown by failing asserts
        return f"command: {self.command}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"


RunFakeserve = Callable[..., FakeRun]


def _run_fakeserve(
    out: Path,
    python: str = sys.executable,
    *,
    tp: int = 2,
    plan: str = "2,2,8,8,2",
    faults: Sequence[str] = (),
    start_method: str = "spawn",
    selection: Selection | None = None,
    backend: Backend = Backend.AUTO,
    deep_dive: DeepDive | None = None,
    extra_path: Sequence[Path] = (),
    extra_env: Mapping[str, str] | None = None,
) -> FakeRun:
    command = [python, "-m", "fakeserve.launch", "--tp", str(tp), "--plan", plan]
    command += ["--start-method", start_method] + [f"--fault={fault}" for fault in faults]
    output: dict[str, str] = {}

    def launcher(cmd: Sequence[str], env: Mapping[str, str]) -> int:
        done = subprocess.run(list(cmd), env=dict(env), capture_output=True, text=True, timeout=120)
        output.update(stdout=done.stdout, stderr=done.stderr)
        return done.returncode

    path = os.pathsep.join(str(p) for p in (PROGRAMS, *extra_path))
    env = {**os.environ, "PYTHONPATH": path, **(extra_env or {})}
    result = run_traced(
        command,
        out,
        selection or fakeserve_selection(),
        backend=backend,
        deep_dive=deep_dive,
        env=env,
        launcher=launcher,
    )
    return FakeRun(result, load_trace(out), output["stdout"], output["stderr"], command)


@pytest.fixture
def run_fakeserve(tmp_path: Path) -> RunFakeserve:
    """``run_fakeserve(python, plan=..., faults=...)``: a traced fakeserve run in ``tmp_path``."""
    counter = iter(range(1000))

    def run(*args: object, **kwargs: object) -> FakeRun:
        return _run_fakeserve(tmp_path / f"trace{next(counter)}", *args, **kwargs)  # type: ignore[arg-type]

    return run


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``recorded(*faults, plan=...)``: the directory of a fakeserve trace, recorded once."""
    cache: dict[tuple[tuple[str, ...], str], Path] = {}

    def get(*faults: str, plan: str = "2,2,8,8,2") -> Path:
        key = (faults, plan)
        if key not in cache:
            out = tmp_path_factory.mktemp("recorded") / "trace"
            _run_fakeserve(out, plan=plan, faults=faults)
            cache[key] = out
        return cache[key]

    return get
