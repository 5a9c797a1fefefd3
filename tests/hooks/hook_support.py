"""Helpers of the hook tests, in the hook's terms: toy trees, fake server runs, toggles."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sgtrace.graphs.build import Project
from sgtrace.graphs.source import SourceTree, open_source
from sgtrace.hooks.sites import locate_sites
from sgtrace.hooks.spec import HookSpec
from sgtrace.payload.policy import PolicyConfig, PolicyKind

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases"
FAKE_SERVER = HERE / "fake_server.py"
# The folders each case is made of, copied in this order (see cases/README.md).
LAYERS = {
    "zero_step_states": ("toy_common", "zero_step_states/input"),
    "scheduler_mixins": ("toy_common", "scheduler_mixins/input"),
    "no_zero_step": ("toy_common", "zero_step_states/input", "no_zero_step/input"),
    "missing_decode_guard": ("toy_common", "zero_step_states/input", "missing_decode_guard/input"),
}
BATCH_SIZE_POLICY = PolicyConfig(
    preset="batch-size", kind=PolicyKind.THRESHOLD, acceptance_gate=False, min_dwell_steps=8
)
# fake_server.py --step-cost: speculation 2 ms + 0.2 ms a request, plain decode 1 ms + 0.01 ms a
# request. With the good draft's 4 tokens a verify, speculation makes 1.8x the tokens/s of plain
# decoding at batch size 1 and 0.45x at 64.
STEP_COST = "0.002,0.0002,0.001,0.00001"

_COST = " cost: "  # costs.py's lines: sgtrace-hook rank=N cost: ...


def toy_tree(case: str, dest: Path) -> SourceTree:
    """Copy the layers of ``case`` into ``dest`` and open it as a source tree."""
    for layer in LAYERS[case]:
        shutil.copytree(CASES / layer, dest, dirs_exist_ok=True)
    return open_source(dest)


def toy_spec(tree: SourceTree) -> HookSpec:
    """The sites of a toy tree, located without the on-disk summary cache."""
    return locate_sites(tree, Project(tree, use_cache=False))


@dataclass(frozen=True)
class FakeRun:
    """What one fake_server.py process reported, and its log lines."""

    report: dict
    log: list[str]

    @property
    def toggles(self) -> list[tuple[int, int, str, str]]:
        """``(step, batch_size, "on"|"off", reason)`` of every decision that changed the state."""
        return [
            (step, size, "on" if on else "off", reason)
            for step, _rank, size, on, changed, reason, _accept, *_period in self.report[
                "decisions"
            ]
            if changed
        ]

    @property
    def hook_lines(self) -> list[str]:
        """The log lines the hook wrote (they all start with ``sgtrace-hook``), but those of
        what it costs (``payload/costs.py``: a long garbage collection is the host's, not a
        decision; ``cost_lines``)."""
        return [line for line in self.log if line.startswith("sgtrace-hook") and _COST not in line]

    @property
    def cost_lines(self) -> list[str]:
        """The hook's lines of what it and the garbage collector cost the process."""
        return [line for line in self.log if line.startswith("sgtrace-hook") and _COST in line]


def run_fake_server(pythonpath: list[Path], *args: str, timeout_s: float = 60) -> FakeRun:
    """Run fake_server.py in a fresh interpreter with ``pythonpath``; fail with its stderr."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    proc = subprocess.run(
        [sys.executable, str(FAKE_SERVER), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout_s,
        check=False,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"fake_server.py {' '.join(args)} failed ({proc.returncode}) with PYTHONPATH="
            f"{env['PYTHONPATH']}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )
    return FakeRun(json.loads(proc.stdout), proc.stderr.splitlines())


def assert_toggles(run: FakeRun, expected: list[tuple[int, int, str, str]]) -> None:
    """The run toggled exactly as ``expected``; prints both lists and the hook's log if not."""
    if run.toggles != expected:
        log = "\n".join(run.hook_lines)
        raise AssertionError(
            f"toggles differ\nexpected: {expected}\nactual:   {run.toggles}\nhook log:\n{log}"
        )
