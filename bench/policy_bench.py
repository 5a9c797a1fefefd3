"""Predict how each speculation policy does on the live crossover runs, before running them.

Issue 21's bar: the hook with its defaults at least 0.97x the better of no speculation and
EAGLE-3 at every level, 1-128 requests, on drafts of accept length ~3.4, ~2.5 and ~1.2 and two
load shapes. This benchmark drives each policy through ``bench/live/plans/crossover-fixed.toml``'s
fixed-work turns (``policy_waves.py``) on machines built from the live measurements
(``policy_machines.py``), beside the two references run alike, and reports each policy's time
for a level's waves relative to the better reference: ``better / policy`` (1.0: as fast as the
better; 0.97: the bar). Each seed is one simulated live run (``reps`` turns a level, every server
its own host noise); the spread over seeds is what one live run's number would scatter by.
"quiet" repeats the runs without host noise (the same requests): what the policy's mechanism
costs by itself.

Policies: ``calibrated`` (the ``calibrated`` preset, the default: what ``sgtrace inject-hook``
runs without flags), ``threshold`` (the ``threshold`` preset, the default before) and ``threshold-24`` (``policy_call21.json``: off
above 24 requests, the rule measured live in calls 21-25). References: ``eagle3`` (always on)
and ``no-spec`` (no speculation; the hook's plain off state measured within 1% of it,
``plain_cost_0.5.16``). Upstream's ``--speculative-adaptive`` is not simulated.

Writes ``policy.md`` and ``policy.csv``::

    python bench/policy_bench.py [--seeds 16] [--out bench/results]
    python bench/policy_bench.py --quick --out /tmp/policy    # a small case, for a test
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Container, Mapping, Sequence
from pathlib import Path

from policy_fit import live_machines
from policy_machines import (
    ROOT,
    LiveMachine,
    SlowTurns,
    TurnNoise,
    read_plan,
)
from policy_report import Cell, Setting, render_csv, render_markdown
from policy_sim import QUIET, Constant, Noise
from policy_waves import ONE_LENGTH, SPREAD, Load, Run, Shape, Wave, run_server
from sgtrace.payload.policies import make_policy
from sgtrace.payload.policy import PRESETS, Policy, PolicyConfig

POLICY_FILES = {"threshold-24": ROOT / "bench/results/live/sweep/policy_call21.json"}
REFERENCES = {"eagle3": True, "no-spec": False}
STEP_NOISE = Noise(sigma=0.05, spikes=0.01, spike=2.0, prefills=0.0)
QUICK_LEVELS = (1, 16, 128)
QUICK_DRAFTS = ("a34", "a12")


def policy_configs() -> dict[str, PolicyConfig]:
    """The policies compared, by name (see the module docstring)."""
    configs = {
        "calibrated": PolicyConfig.from_dict(PRESETS["calibrated"]),
        "threshold": PolicyConfig.from_dict(PRESETS["threshold"]),
    }
    for name, path in POLICY_FILES.items():
        configs[name] = PolicyConfig.from_dict(json.loads(path.read_text()))
    return configs


def _runs(servers: Mapping[str, PolicyConfig | bool], run: Run) -> dict[str, list[Wave]]:
    def fresh(value: PolicyConfig | bool) -> Policy:
        return Constant(value) if isinstance(value, bool) else make_policy(value)

    return {name: run_server(fresh(value), run, name) for name, value in servers.items()}


def relative_times(
    waves: Mapping[str, Sequence[Wave]], level: int, reps: Container[int] | None = None
) -> dict[str, float]:
    """Each server's time at ``level`` relative to the better reference in the same run (the
    one faster over all turns); ``reps``: only those turns."""

    def total(ws: Sequence[Wave], kept: Container[int] | None) -> float:
        return sum(w.seconds for w in ws if w.level == level and (kept is None or w.rep in kept))

    better = min(REFERENCES, key=lambda name: total(waves[name], None))
    reference = total(waves[better], reps)
    return {name: reference / total(ws, reps) for name, ws in waves.items()}


def simulate_case(
    machine: LiveMachine,
    shape: Shape,
    load: Load,
    seeds: Sequence[int],
    turns: TurnNoise,
    policies: Mapping[str, PolicyConfig],
    noise: Noise = STEP_NOISE,
) -> list[Cell]:
    """Every server's cells for one draft and shape."""
    servers: dict[str, PolicyConfig | bool] = {**policies, **REFERENCES}
    noisy = [_runs(servers, Run(machine, load, shape, s, noise, turns)) for s in seeds]
    quiet = [_runs(servers, Run(machine, load, shape, s, QUIET, None)) for s in seeds]
    cells = []
    for level in load.levels:
        loud = [relative_times(run, level) for run in noisy]
        calm = [relative_times(run, level) for run in quiet]
        first = [relative_times(run, level, {1}) for run in quiet]
        for name in servers:
            ws = [w for run in noisy for w in run[name] if w.level == level]
            cells.append(
                Cell(
                    machine.draft,
                    machine.source,
                    machine.accept_length,
                    shape.name,
                    level,
                    name,
                    tuple(r[name] for r in loud),
                    tuple(r[name] for r in calm),
                    tuple(r[name] for r in first),
                    sum(w.on_steps for w in ws) / sum(w.steps for w in ws),
                    sum(w.toggles for w in ws) / len(ws),
                )
            )
    return cells


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=16, help="simulated live runs per case")
    p.add_argument("--reps", type=int, default=None, help="turns a level (default: the plan's)")
    p.add_argument(
        "--quick", action="store_true", help="2 seeds, 1/16/128 requests, 2 turns, a34 and a12"
    )
    p.add_argument(
        "--prefill-s", type=float, default=None, help="the prefill stall (default: fitted)"
    )
    p.add_argument(
        "--slow-turns",
        nargs=2,
        type=float,
        metavar=("FACTOR", "EVERY"),
        help="besides the A/A pairs' turn noise, one turn in EVERY FACTOR times slower",
    )
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    return p.parse_args(argv)


def plan_load(quick: bool, reps: int | None) -> tuple[Load, tuple[Shape, ...], set[str] | None]:
    """The plan's levels and turns (``--quick``: a few), the shapes and the drafts kept."""
    plan = read_plan()
    max_new = int(plan["load"]["max_new"])
    if quick:
        return Load(QUICK_LEVELS, reps or 2, max_new), (ONE_LENGTH,), set(QUICK_DRAFTS)
    levels = tuple(int(n) for n in plan["load"]["concurrency"])
    return Load(levels, reps or int(plan["schedule"]["reps"]), max_new), (ONE_LENGTH, SPREAD), None


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    load, shapes, kept = plan_load(a.quick, a.reps)
    derivation, turns, found = live_machines(prefill_s=a.prefill_s)  # policy_fit.py
    if a.slow_turns:
        turns = SlowTurns(turns.samples, a.slow_turns[0], int(a.slow_turns[1]))
    machines = [m for m in found if kept is None or m.draft in kept]
    seeds = tuple(range(1, (2 if a.quick else a.seeds) + 1))
    policies = policy_configs()
    cells: list[Cell] = []
    for machine in machines:
        for shape in shapes:
            cells += simulate_case(machine, shape, load, seeds, turns, policies)
            print(f"{machine.draft} {shape.name}: done", file=sys.stderr)
    command = "python bench/policy_bench.py" + (" --quick" if a.quick else f" --seeds {a.seeds}")
    command += f" --reps {a.reps}" if a.reps else ""
    command += f" --prefill-s {a.prefill_s}" if a.prefill_s is not None else ""
    command += f" --slow-turns {a.slow_turns[0]:g} {a.slow_turns[1]:g}" if a.slow_turns else ""
    setting = Setting(derivation, turns, tuple(machines), load, len(seeds), STEP_NOISE, command)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "policy.csv").write_text(render_csv(cells))
    (a.out / "policy.md").write_text(render_markdown(cells, setting))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
