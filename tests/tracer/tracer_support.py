"""Helpers of the tracer tests: the fakeserve programs, other Pythons, traced runs.

``programs/fakeserve`` is a miniature of SGLang's speculative decode path (see its docstring);
``run_fakeserve`` runs it under ``run_traced`` in real processes: one scheduler per TP rank,
spawned, then killed by SIGKILL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sgtrace.names import QualName
from sgtrace.tracer.events import Backend, Role
from sgtrace.tracer.launch import DeepDive, TraceRun, run_traced
from sgtrace.tracer.load import Trace, load_trace
from sgtrace.tracer.selection import HOOK_DECISION, Selection, default_selection

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
    Role.DECISION: (HOOK_DECISION,),
    Role.OTHER: (QualName(_S, "Scheduler.wait_for_requests"),),
}


def fakeserve_selection() -> Selection:
    """The fakeserve counterpart of SGLang's default selection, plus the idle wait."""
    return default_selection(FAKESERVE_NAMES)


def _runs(python: str, minimum: tuple[int, int]) -> bool:
    check = f"import sys; sys.exit(sys.version_info[:2] < {minimum!r})"
    try:
        return (
            subprocess.run([python, "-c", check], capture_output=True, timeout=30).returncode == 0
        )
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


def run_fakeserve_into(
    out: Path,
    python: str = sys.executable,
    *,
    tp: int = 2,
    plan: str = "2,2,8,8,2",
    faults: Sequence[str] = (),
    start_method: str = "spawn",
    decide: str = "in-step",
    selection: Selection | None = None,
    backend: Backend = Backend.AUTO,
    deep_dive: DeepDive | None = None,
    extra_path: Sequence[Path] = (),
    extra_env: Mapping[str, str] | None = None,
) -> FakeRun:
    command = [python, "-m", "fakeserve.launch", "--tp", str(tp), "--plan", plan]
    command += ["--start-method", start_method, "--decide", decide]
    command += [f"--fault={fault}" for fault in faults]
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


Call = tuple[int | None, str, dict[str, object]]


def _prefill(step: int, size: int) -> list[Call]:
    return [
        (step, "step", {"batch_size": size, "forward_mode": "EXTEND"}),
        (
            step,
            "spec_forward",
            {"batch_size": size, "forward_mode": "EXTEND", "num_steps": 3, "draft_width": 4},
        ),
        (
            step,
            "target_forward",
            {"batch_size": size, "forward_mode": "EXTEND", "is_verify": False},
        ),
        (step, "draft_extend_prefill", {"batch_size": size}),
    ]


def _decode(
    step: int, size: int, on: bool, changed: bool, accept: float | None, hook_step: int
) -> list[Call]:
    decision: dict[str, object] = {
        "batch_size": size,
        "spec_on": on,
        "changed": changed,
        "reason": "low-load" if on else "high-load",
        "hook_step": hook_step,
        "arriving": 0,  # a decision on a decode result
        "cohort": 0,
        "cohort_tokens": 0,
        "wave_lengths": [],
    }
    if accept is not None:
        decision["accept_length"] = accept
    width, steps, accepted = (4, 3, 2) if on else (1, 0, 1)
    drafting: list[Call] = [
        (step, "draft", {"batch_size": size, "num_steps": 3, "topk": 1}),
        (step, "draft_forward", {"batch_size": size, "num_steps": 3}),
    ]
    return [
        (step, "step", {"batch_size": size, "forward_mode": "DECODE"}),
        (
            step,
            "spec_forward",
            {"batch_size": size, "forward_mode": "DECODE", "num_steps": 3, "draft_width": 4},
        ),
        (step, "decision", decision),
        *(drafting if on else []),
        (step, "verify", {"batch_size": size, "draft_width": width, "num_steps": steps}),
        (step, "target_forward", {"batch_size": size, "forward_mode": "DECODE", "is_verify": True}),
        (step, "draft_extend_decode", {"batch_size": size}),
        (
            step,
            "decode_result",
            {
                "batch_size": size,
                "accept_lengths": [float(accepted)] * size,
                "accepted_drafts": (accepted - 1) * size,
            },
        ),
    ]


# What each rank of `fakeserve.launch --plan 2,2,8,8,2` calls, in start order: a prefill
# (step 1), then decode steps 2-6; the toy policy speculates while batch_size <= 4.
EXPECTED_CALLS: list[Call] = [
    *_prefill(1, 2),
    *_decode(2, 2, on=True, changed=False, accept=None, hook_step=0),
    *_decode(3, 2, on=True, changed=False, accept=2.0, hook_step=1),
    *_decode(4, 8, on=False, changed=True, accept=2.0, hook_step=2),
    *_decode(5, 8, on=False, changed=False, accept=1.0, hook_step=3),
    *_decode(6, 2, on=True, changed=True, accept=1.0, hook_step=4),
]

# fakeserve.workers.busy calls per rank for that plan: 20 per target forward, 1 per draft
# forward and per draft extend: prefill 21, ON 22, OFF 21.
BUSY_CALLS_PER_RANK = 21 + 22 + 22 + 21 + 21 + 22


def _duration(calls: Sequence[Call], index: int) -> int:
    """500 ns; a ``step`` (run_batch) call lasts until the step's last call but the decode
    result, which the scheduler handles after run_batch returns (as in fakeserve)."""
    step, role, _ = calls[index]
    if role != "step":
        return 500
    inside = [k for k, c in enumerate(calls) if c[0] == step and c[1] != "decode_result"]
    return 1000 * (max(inside) - index) + 500


def write_calls(directory: Path, calls_by_rank: Mapping[int, Sequence[Call]]) -> Path:
    """A synthetic trace: one process per rank (pid 100 + rank) making ``calls`` in order,
    starting 1 µs apart; functions named as in fakeserve by role. Returns ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    for rank, calls in calls_by_rank.items():
        pid = 100 + rank
        header = {"type": "process", "pid": pid, "ppid": 1, "argv": ["python"],
                  "python": "3.12.1", "backend": "monitoring"}  # fmt: skip
        lines = [header]
        for index, (step, role, facts) in enumerate(calls):
            name = FAKESERVE_NAMES[Role(role)][0]
            timing = {"t0": 1000 * index, "dur": _duration(calls, index), "tid": 1}
            call = {"type": "call", "fn": str(name), "role": role, "rank": rank, "step": step}
            lines.append({**call, **timing, "facts": facts})
        text = "".join(json.dumps(line) + "\n" for line in lines)
        (directory / f"events-{pid}.jsonl").write_text(text, encoding="utf-8")
    return directory


def without(calls: Sequence[Call], step: int, *roles: str) -> list[Call]:
    """``calls`` without those of ``roles`` in ``step``."""
    return [call for call in calls if not (call[0] == step and call[1] in roles)]
