"""A plan's draft fitted to its live fixed-work waves, where it has some: the machines the policy
benchmarks run on.

``policy_machines.py`` derives each recorded draft's speculative step from time-window sweeps
through a model of the prefill stalls of a closed loop; the fair draft (``mid``) rests on one
such call, and replayed beside the live fixed-work calls (``policy_vs_live.py``) its simulated
lead of EAGLE-3 over no speculation was 19-23% too low at 16-32 requests and 11-27% too high at
64-128. A fixed-work call of waves (``fixed_batch``: each turn one ``/generate`` call of C
prompts, one prefill, then decode steps until the last request is answered: the crossover plan
itself, ``crossover-fixed.toml``) needs no such model: the simulation runs the same waves. So
where a plan's draft has wave calls, its speculative step at each of their levels is fitted to
them: starting from the derived curve, each level's step is scaled by the simulated over the
measured ratio of EAGLE-3's tokens per second to no speculation's (the means over the calls),
until they agree within :data:`TOLERANCE` (a wave's time grows with the steps of its level and,
in its tail, of the levels below, so a few rounds settle it). No speculation's step stays as
derived (from fixed-work waves already), and so does every draft without wave calls.

What the fit is measured against is then no longer held out: ``policy_vs_live.py`` marks those
calls; the calls of other loads (``load.py``'s levels) stay a test of the fitted machine.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from policy_machines import (
    SWEEP,
    Curve,
    Derivation,
    LiveMachine,
    TurnNoise,
    build_machines,
    derive,
    on_the_card,
    plan_drafts,
    read_plan,
    read_rows,
)
from policy_sim import QUIET, Constant, Noise
from policy_waves import Load, Run, Shape, run_server
from sgtrace.payload.policy import Policy

FIT_SEEDS = (1, 2, 3, 4)  # simulated runs a round: the draft's acceptance is random
ROUNDS = 12
TOLERANCE = 0.002  # simulated over measured ratio, at every level


@dataclass(frozen=True)
class Plan:
    """What a fixed-work call ran: its draft, levels (in order), turns a level, requests a
    client, whether each wave was one ``/generate`` call, and the request lengths."""

    call: str
    draft: str
    levels: tuple[int, ...]
    reps: int
    requests: int
    batch: bool
    max_new: int
    spread: float


def plan_of(run: Path) -> Plan | None:
    """The plan of a stored call, or None where it is no fixed-work call of a plan's draft."""
    if not on_the_card(run):  # the machines are one card's
        return None
    rows = [r for r in read_rows(run) if r.get("mode") == "fixed"]
    drafts = {str(r["label"]).split("-", 1)[1] for r in rows if str(r["label"]).startswith("hook-")}
    if not rows or len(drafts) != 1:
        return None
    first = rows[0]
    return Plan(
        run.name,
        drafts.pop(),
        tuple(sorted({int(str(r["concurrency"])) for r in rows})),
        max(int(str(r["rep"])) for r in rows),
        int(str(first["fixed_requests"])),
        bool(first["fixed_batch"]),
        int(str(first["max_new"])),
        float(str(first["max_new_spread"])),
    )


def measured(run: Path, plan: Plan) -> dict[int, tuple[float, float, float]]:
    """Per level: EAGLE-3 over base (ratio of the turns' means), the standard error of the
    per-turn log ratio (paired by turn), and the hook over the better (ratio of the means)."""
    rates: dict[tuple[str, int], dict[int, float]] = defaultdict(dict)
    names = {"base": "base", f"eagle3-{plan.draft}": "eagle3", f"hook-{plan.draft}": "hook"}
    for r in read_rows(run):
        name = names.get(str(r["label"]))
        if name is not None and r.get("mode") == "fixed":
            rates[(name, int(str(r["concurrency"])))][int(str(r["rep"]))] = float(
                str(r["tok_per_s"])
            )
    out = {}
    for level in plan.levels:
        base, eagle, hook = (rates[(name, level)] for name in ("base", "eagle3", "hook"))
        turns = sorted(set(base) & set(eagle))
        logs = [math.log(eagle[t] / base[t]) for t in turns]
        se = statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else math.nan
        b, e, h = (statistics.fmean(v.values()) for v in (base, eagle, hook))
        out[level] = (e / b, se, h / max(b, e))
    return out


def wave_plans(sweep: Path = SWEEP) -> dict[str, list[Plan]]:
    """The stored calls of waves (``fixed_batch``), by plan draft, in call order."""
    out: dict[str, list[Plan]] = defaultdict(list)
    calls = sorted(sweep.glob("call*"), key=lambda d: int(d.name[4:]))
    for run in calls:
        plan = plan_of(run)
        if plan is not None and plan.batch:
            out[plan.draft].append(plan)
    return dict(out)


def wave_seconds(
    policy: Policy, machine: LiveMachine, plan: Plan, seed: int, noise: Noise, name: str
) -> dict[int, float]:
    """One server's seconds at each level of ``plan``'s waves, all its turns (``name`` seeds
    its own draws, as in ``policy_waves.run_server``)."""
    load = Load(plan.levels, plan.reps, plan.max_new)
    shape = Shape("spread" if plan.spread else "one length", plan.spread)
    seconds: dict[int, float] = defaultdict(float)
    for wave in run_server(policy, Run(machine, load, shape, seed, noise, None), name):
        seconds[wave.level] += wave.seconds
    return dict(seconds)


def simulated_ratios(machine: LiveMachine, plan: Plan, seeds: Sequence[int]) -> dict[int, float]:
    """EAGLE-3's tokens per second over no speculation's at each level of ``plan``'s waves
    (the ratio of the total times; both serve the same requests), means over ``seeds``."""
    found: dict[int, list[float]] = defaultdict(list)
    for seed in seeds:
        base = wave_seconds(Constant(False), machine, plan, seed, QUIET, "base")
        eagle = wave_seconds(Constant(True), machine, plan, seed, QUIET, "eagle3")
        for level in plan.levels:
            found[level].append(base[level] / eagle[level])
    return {level: statistics.fmean(v) for level, v in found.items()}


def fit_on(
    machine: LiveMachine, plans: Sequence[Plan], targets: Mapping[int, float]
) -> tuple[Curve, int]:
    """``machine``'s speculative curve fitted so that the simulated EAGLE-3 / base of
    ``plans``' waves meets ``targets`` (by level); the curve and the rounds it took."""
    points = dict(machine.on.points)
    for level in targets:
        points.setdefault(level, machine.on.at(level))
    for rounds in range(1, ROUNDS + 1):
        fitted = replace(machine, on=Curve(tuple(sorted(points.items()))))
        simulated: dict[int, list[float]] = defaultdict(list)
        for plan in plans:
            for level, ratio in simulated_ratios(fitted, plan, FIT_SEEDS).items():
                simulated[level].append(ratio)
        errors = {c: statistics.fmean(simulated[c]) / targets[c] for c in targets}
        if max(abs(e - 1.0) for e in errors.values()) <= TOLERANCE:
            return fitted.on, rounds
        for level, error in errors.items():
            points[level] *= error
    raise ValueError(f"{machine.draft}: the fit to its waves did not settle in {ROUNDS} rounds")


def live_machines(
    sweep: Path = SWEEP, prefill_s: float | None = None
) -> tuple[Derivation, TurnNoise, list[LiveMachine]]:
    """The derivation, the turn noise and the plan's machines, each draft with wave calls
    fitted to them (its ``source`` says so)."""
    derivation, turns = derive(sweep=sweep, prefill_s=prefill_s)
    machines = build_machines(derivation, plan_drafts(read_plan()))
    plans = wave_plans(sweep)
    out = []
    for machine in machines:
        mine = plans.get(machine.draft, [])
        if not mine:
            out.append(machine)
            continue
        ratios: dict[int, list[float]] = defaultdict(list)
        for plan in mine:
            for level, (ratio, _, _) in measured(sweep / plan.call, plan).items():
                ratios[level].append(ratio)
        targets = {level: statistics.fmean(v) for level, v in ratios.items()}
        curve, _ = fit_on(machine, mine, targets)
        names = ", ".join(p.call for p in mine)
        out.append(replace(machine, on=curve, source=f"{machine.source}, fitted to {names}"))
    return derivation, turns, out
