"""A toy machine fed to the calibrated policy with a fake clock, as the hook would feed it.

:class:`Machine` gives each state's step time by batch size; :func:`simulate` runs a policy over
a batch-size schedule with the overlap scheduler's lag (a decision on result ``k`` runs from
result ``k + 2``), host noise (log-normal, and now and then a step stretched several times), and
prefills between decode results (the hook then gives no period).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from sgtrace.payload.policies import make_policy
from sgtrace.payload.policy import Decision, Observation, PolicyConfig, PolicyKind

LAG = 2  # the overlap scheduler: a decision on result k governs the launch of k + 2


@dataclass(frozen=True)
class Machine:
    """Step seconds ``on_s + on_per_req_s * bs`` speculating, ``off_s + off_per_req_s * bs``
    in the zero-step state; ``accept``: the draft's mean accept length (bonus included)."""

    accept: float
    on_s: float = 0.006
    on_per_req_s: float = 0.0003
    off_s: float = 0.005
    off_per_req_s: float = 0.00005

    def seconds(self, batch_size: int, spec_on: bool) -> float:
        if spec_on:
            return self.on_s + self.on_per_req_s * batch_size
        return self.off_s + self.off_per_req_s * batch_size

    def gain(self, batch_size: int) -> float:
        """Speculation's goodput over the off state's at ``batch_size`` (1.1: 10% better)."""
        on = self.accept / self.seconds(batch_size, True)
        return on / (1.0 / self.seconds(batch_size, False))

    def crossover(self) -> float:
        """The batch size where both states make the same goodput."""
        num = self.accept * self.off_s - self.on_s
        return num / (self.on_per_req_s - self.accept * self.off_per_req_s)


@dataclass(frozen=True)
class Noise:
    """Host noise: log-normal sigma, the share of steps stretched ``spike`` times, the share
    of results after a prefill (untimed)."""

    sigma: float = 0.1
    spikes: float = 0.03
    spike: float = 5.0
    prefills: float = 0.05


QUIET = Noise(sigma=0.0, spikes=0.0, prefills=0.0)
HOST = Noise()
DEFAULTS = PolicyConfig(kind=PolicyKind.CALIBRATED)  # the calibrated policy with its defaults


@dataclass(frozen=True)
class Step:
    """One simulated result: its batch size, the state that ran it, the observation and the
    decision."""

    batch_size: int
    ran_on: bool
    obs: Observation
    decision: Decision


def simulate(
    machine: Machine,
    schedule: Sequence[int],
    noise: Noise = HOST,
    config: PolicyConfig = DEFAULTS,
    seed: int = 1,
) -> list[Step]:
    """Run a fresh policy of ``config`` over one result per batch size of ``schedule``."""
    rng = random.Random(seed)
    policy = make_policy(config)
    decided = [True] * (LAG + 1)  # the server launches speculating
    out: list[Step] = []
    for step, size in enumerate(schedule):
        ran_on = decided[-1 - LAG]
        period: float | None = machine.seconds(size, ran_on) * rng.lognormvariate(0, noise.sigma)
        if rng.random() < noise.spikes:
            period *= noise.spike
        if rng.random() < noise.prefills:
            period = None
        spread = 0.1 if machine.accept > 1.2 else 0.05
        lengths = (
            tuple(machine.accept + rng.uniform(-spread, spread) for _ in range(size))
            if ran_on
            else None
        )
        obs = Observation(step, size, lengths, decided[-1], period)
        decision = policy.decide(obs)
        decided.append(decision.spec_on)
        out.append(Step(size, ran_on, obs, decision))
    return out


def levels(*sizes: int, hold: int = 600) -> list[int]:
    """A schedule holding each batch size for ``hold`` results."""
    return [size for size in sizes for _ in range(hold)]


def on_share(steps: Sequence[Step]) -> float:
    """The share of results the policy decided on."""
    return sum(s.decision.spec_on for s in steps) / len(steps)


def toggles(steps: Sequence[Step]) -> list[tuple[int, int, bool, str]]:
    """``(step, batch_size, spec_on, reason)`` of every toggle."""
    return [
        (s.obs.step, s.batch_size, s.decision.spec_on, s.decision.reason.value)
        for s in steps
        if s.decision.changed
    ]
