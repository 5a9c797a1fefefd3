"""One cell of ``policy_bench.py``, seed by seed: where a mean hides a run that went wrong.

For one draft and load shape of the crossover plan's fixed-work turns (``policy_waves.py``, the
machines of ``policy_fit.py``), each seed's level on the quiet machine (no host noise: what the
policy's mechanism does by itself; ``--noise``: with ``policy_bench.py``'s host noise): the hook's defaults against the better of EAGLE-3 and no
speculation (``better / policy``, as ``policy_bench.py`` reports it), EAGLE-3 against no
speculation, and the share of steps the hook ran speculating; with ``--toggles``, each switch
it decided (step, batch size, state, reason)::

    python bench/policy_seeds.py a25 spread --seeds 8 [--levels 64 128] [--toggles] [--noise]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from policy_bench import REFERENCES, STEP_NOISE, policy_configs, relative_times
from policy_fit import live_machines
from policy_machines import read_plan
from policy_sim import QUIET, Constant
from policy_waves import ONE_LENGTH, SPREAD, Load, Run, run_server
from sgtrace.payload.policies import make_policy
from sgtrace.payload.policy import Decision, Observation, Policy

SHAPES = {"one": ONE_LENGTH, "spread": SPREAD}


class Switches:
    """A policy that keeps the switches it decided: (step, batch size, on, reason)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.decides_arrivals = getattr(policy, "decides_arrivals", False)
        self.seen: list[tuple[int, int, bool, str]] = []

    def decide(self, obs: Observation) -> Decision:
        decision = self.policy.decide(obs)
        if decision.changed:
            self.seen.append((obs.step, obs.batch_size, decision.spec_on, decision.reason.value))
        return decision


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("draft", help="a draft of the plan: a34, a25, a12")
    p.add_argument("shape", choices=sorted(SHAPES))
    p.add_argument("--seeds", type=int, default=8)
    p.add_argument("--levels", type=int, nargs="*", help="default: the plan's")
    p.add_argument("--toggles", action="store_true", help="print each switch")
    p.add_argument("--noise", action="store_true", help="with policy_bench.py's host noise")
    a = p.parse_args(argv)
    _, turns, found = live_machines()
    machines = {m.draft: m for m in found}
    if a.draft not in machines:
        p.error(f"no draft {a.draft!r} in the plan; one of {', '.join(sorted(machines))}")
    plan = read_plan()
    levels = tuple(int(n) for n in plan["load"]["concurrency"])
    load = Load(levels, int(plan["schedule"]["reps"]), int(plan["load"]["max_new"]))
    shown = a.levels or levels
    calibrated = policy_configs()["calibrated"]
    print("seed level hook/better eagle3/no-spec on_share")
    for seed in range(1, a.seeds + 1):
        noise = (STEP_NOISE, turns) if a.noise else (QUIET, None)
        run = Run(machines[a.draft], load, SHAPES[a.shape], seed, *noise)
        hook = Switches(make_policy(calibrated))
        waves = {"hook": run_server(hook, run, "calibrated")}
        waves |= {name: run_server(Constant(on), run, name) for name, on in REFERENCES.items()}
        for level in shown:
            mine = [w for w in waves["hook"] if w.level == level]
            against = relative_times(waves, level)
            on_share = sum(w.on_steps for w in mine) / sum(w.steps for w in mine)
            ratio = against["eagle3"] / against["no-spec"]
            print(f"{seed} {level} {against['hook']:.3f} {ratio:.3f} {on_share:.2f}")
        if a.toggles:
            print(f"  switches: {hook.seen}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
