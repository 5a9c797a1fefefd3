"""A toy machine fed to the calibrated policy with a fake clock, as the hook would feed it.

:class:`Machine` gives each state's step time by batch size; :func:`simulate` runs a policy over
a batch-size schedule through ``bench/policy_sim.py``'s :class:`Server`: the overlap scheduler's
lag (a decision on result ``k`` runs from result ``k + 2``), host noise (log-normal, and now and
then a step stretched several times), and prefills between decode results (the hook then gives
no period). ``bench/policy_bench.py`` drives the same server with machines built from the live
measurements.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from bench.policy_sim import QUIET, Noise, Server, Step, switch_steps

from sgtrace.payload.policies import make_policy
from sgtrace.payload.policy import PolicyConfig, PolicyKind


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


HOST = Noise()
DEFAULTS = PolicyConfig(kind=PolicyKind.CALIBRATED)  # the calibrated policy with its defaults


def simulate(
    machine: Machine,
    schedule: Sequence[int],
    noise: Noise = HOST,
    config: PolicyConfig = DEFAULTS,
    seed: int = 1,
    prefill_every: int = 0,
    free_switches: bool = False,
) -> list[Step]:
    """Run a fresh policy of ``config`` over one result per batch size of ``schedule``; with
    ``prefill_every``, every that many results follow a prefill batch of 5 ms (the hook times
    them as interrupted periods); ``free_switches``: a switch costs nothing (``Server``)."""
    rng = random.Random(seed)
    server = Server(make_policy(config), free_switches=free_switches)  # launched speculating
    spread = 0.1 if machine.accept > 1.2 else 0.05

    def lengths(size: int, ran_on: bool) -> tuple[float, ...] | None:
        if not ran_on:
            return None
        return tuple(machine.accept + rng.uniform(-spread, spread) for _ in range(size))

    def before(i: int) -> float:
        return 0.005 if prefill_every and i % prefill_every == prefill_every - 1 else 0.0

    return [
        server.step(
            machine, size, lambda on, size=size: lengths(size, on), noise, rng, before_s=before(i)
        )
        for i, size in enumerate(schedule)
    ]


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


__all__ = [
    "HOST",
    "QUIET",
    "Machine",
    "Noise",
    "Step",
    "levels",
    "on_share",
    "simulate",
    "switch_steps",
    "toggles",
]
