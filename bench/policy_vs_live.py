"""The policy simulation against the live calls it can replay: how far to trust it, level by level.

``policy_bench.py`` and ``policy_stream_bench.py`` judge the policies on machines derived from
live sweeps (``policy_machines.py``, ``policy_fit.py``), and a policy tuned on them is only as
good as they are. The fixed-work calls (``bench/results/live/sweep/callN``, rows ``mode =
fixed``) ran a plan's draft, ``base`` and the hook at known levels, turns and lengths; the
derivation reads time windows only, and the calls of waves are what ``policy_fit.py`` fits a
draft's speculative step to (marked ``fitted``: there EAGLE-3 / base agrees by construction).
Each is replayed here with the same plan and the simulated numbers set beside the measured
ones, per level:

* ``EAGLE-3 / base``: tokens per second of speculation over no speculation (the crossover: where
  it falls below 1), measured as the ratio of the turns' means (± one standard error of the
  per-turn log ratios, paired by turn) and simulated (the mean over ``--seeds`` runs);
* ``hook / better``: the hook with its defaults over the better of the two, measured and
  simulated alike.

A call of waves (``fixed_batch``: each turn a warm-up wave, then one ``/generate`` call of C
prompts) replays through ``policy_waves.run_server``, as ``policy_bench.py`` runs the crossover
plan; a call of ``load.py``'s levels (C clients sending their requests one by one) through
``policy_stream.run_stream``, each turn a warm-up of C requests of 4 tokens and then the C
clients' requests, level by level and turn by turn as the sweep ran them. Host noise between
turns is left out (both sides are means over the turns); each step's own noise is kept.

    python bench/policy_vs_live.py [CALL ...] [--seeds 8] [--md bench/results/policy_vs_live.md]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from policy_bench import STEP_NOISE, policy_configs
from policy_fit import Plan, live_machines, measured, plan_of, wave_plans, wave_seconds
from policy_machines import SWEEP, LiveMachine
from policy_sim import Constant
from policy_stream import Lengths, Segment, StreamLoad, run_stream
from sgtrace.payload.policies import make_policy
from sgtrace.payload.policy import Policy

WARMUP_TOKENS = 4  # sweep_fixed.FIXED_WARMUP_TOKENS: each client's warm-up request
SERVERS = ("base", "eagle3", "hook")


@dataclass(frozen=True)
class Level:
    """One level of one call: EAGLE-3 over base and the hook over the better, measured (with
    the standard error of the first) and simulated."""

    call: str
    draft: str
    level: int
    live_ratio: float
    live_se: float
    live_hook: float
    sim_ratio: float
    sim_hook: float
    fitted: bool = False  # the machine was fitted to this call's waves (policy_fit.py)


def _servers() -> dict[str, Callable[[], Policy]]:
    config = policy_configs()["calibrated"]
    return {
        "base": lambda: Constant(False),
        "eagle3": lambda: Constant(True),
        "hook": lambda: make_policy(config),
    }


def simulated(
    plan: Plan, machine: LiveMachine, seeds: Sequence[int]
) -> dict[int, tuple[float, float]]:
    """Per level: EAGLE-3 over base and the hook over the better, means over ``seeds``."""
    ratios: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for seed in seeds:
        rates = {
            name: _rates(plan, machine, seed, name, make()) for name, make in _servers().items()
        }
        for level in plan.levels:
            base, eagle, hook = (rates[name][level] for name in SERVERS)
            ratios[level].append((eagle / base, hook / max(base, eagle)))
    return {
        level: (statistics.fmean(e for e, _ in found), statistics.fmean(h for _, h in found))
        for level, found in ratios.items()
    }


def _rates(
    plan: Plan, machine: LiveMachine, seed: int, name: str, policy: Policy
) -> dict[int, float]:
    """One server's tokens per second at each level of ``plan`` (all its turns)."""
    if plan.batch:
        seconds = wave_seconds(policy, machine, plan, seed, STEP_NOISE, name)
        # the waves' tokens: the same requests on every server, so the time ratio is the rate's
        return {level: plan.reps * level * plan.max_new / s for level, s in seconds.items()}
    if plan.spread:
        raise ValueError(f"{plan.call}: spread lengths without fixed_batch are not replayed")
    segments = []
    for level in plan.levels:
        for _ in range(plan.reps):
            segments.append(Segment(level, 0.0, False, level, WARMUP_TOKENS))
            segments.append(Segment(level, 0.0, True, level * plan.requests))
    load = StreamLoad(plan.call, tuple(segments), Lengths("one", plan.max_new), False)
    results = run_stream(policy, machine, load, seed, STEP_NOISE, name)
    tokens: dict[int, float] = defaultdict(float)
    time: dict[int, float] = defaultdict(float)
    levels = [level for level in plan.levels for _ in range(plan.reps)]
    for level, result in zip(levels, results, strict=True):
        tokens[level] += result.tokens
        time[level] += result.seconds
    return {level: tokens[level] / time[level] for level in plan.levels}


def compare(runs: Sequence[Path], seeds: Sequence[int]) -> list[Level]:
    _, _, found = live_machines()
    machines = {m.draft: m for m in found}
    fitted = {p.call for plans in wave_plans().values() for p in plans}
    out = []
    for run in runs:
        plan = plan_of(run)
        if plan is None or plan.draft not in machines:
            print(f"{run}: no fixed-work call of a plan's draft, skipped", file=sys.stderr)
            continue
        live = measured(run, plan)
        sim = simulated(plan, machines[plan.draft], seeds)
        for level in plan.levels:
            ratio, se, hook = live[level]
            fit = plan.call in fitted
            out.append(Level(plan.call, plan.draft, level, ratio, se, hook, *sim[level], fit))
    return out


def render(levels: Sequence[Level], command: str, seeds: int) -> str:
    lines = [
        "# The policy simulation against the live fixed-work calls",
        "",
        f"    {command}",
        "",
        "Generated by `bench/policy_vs_live.py` (the method: its docstring). Per level, tokens per "
        "second of EAGLE-3 over no speculation (`base`) and of the hook over the better of the "
        "two, measured live (the ratio of the turns' means; ± one standard error of the per-turn "
        f"log ratios) and simulated on the machines of `policy_machines.py` ({seeds} runs, "
        "mean). `gap`: simulated over measured EAGLE-3 / base, less 1 (how far the simulated "
        "crossover is off). The hook's live numbers are the code each call ran (the calls' "
        "record, `bench/results/live/sweep/README.md`), the simulated ones today's policy. "
        "`(fitted)`: a call of waves the draft's speculative step was fitted to "
        "(`policy_fit.py`): its EAGLE-3 / base agrees by construction; the other calls are "
        "held out.",
        "",
        "| call | draft | C | EAGLE-3 / base, live | simulated | gap | hook / better, live | simulated |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for x in levels:
        lines.append(
            f"| {x.call}{' (fitted)' if x.fitted else ''} | {x.draft} | {x.level} | {x.live_ratio:.3f} ± {x.live_se:.3f} | "
            f"{x.sim_ratio:.3f} | {x.sim_ratio / x.live_ratio - 1:+.1%} | {x.live_hook:.3f} | "
            f"{x.sim_hook:.3f} |"
        )
    return "\n".join([*lines, ""])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "calls", nargs="*", type=Path, help="stored calls (default: every fixed-work one)"
    )
    p.add_argument("--seeds", type=int, default=8, help="simulated runs per call")
    p.add_argument("--md", type=Path, help="write the table there (else print it)")
    a = p.parse_args(argv)
    runs = a.calls or sorted(
        (d for d in SWEEP.glob("call*") if plan_of(d) is not None),
        key=lambda d: int(d.name[4:]),
    )
    levels = compare(runs, tuple(range(1, a.seeds + 1)))
    named = " ".join(str(c) for c in a.calls)
    command = f"python bench/policy_vs_live.py {named + ' ' if named else ''}--seeds {a.seeds}"
    text = render(levels, command, a.seeds)
    if a.md is None:
        print(text)
    else:
        a.md.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
