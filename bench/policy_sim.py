"""A policy behind SGLang's overlap scheduler, on a fake clock: the core of the policy simulations.

The hook calls the policy once per decode result; with the overlap scheduler the batch after the
next one is already launched, so a decision on result ``k`` governs the launch of ``k + 2``
(:data:`LAG`). :class:`Server` keeps that pipeline of decisions, times each result on a machine
(anything with ``seconds(batch_size, spec_on)``: :class:`StepTimes`) with host noise
(:class:`Noise`) and hands the policy what the hook would: the batch size, the accept lengths of
a verify, the current state and the period since the previous result (``None`` after another
batch ran in between: a prefill).

Shared by the toy machine of ``tests/hooks/calibrated_support.py`` and the live-shaped waves of
``bench/policy_waves.py``; imports only the standard library and ``sgtrace.payload``.

>>> from sgtrace.payload.policies import make_policy
>>> from sgtrace.payload.policy import PolicyConfig, PolicyKind
>>> class Flat:
...     def seconds(self, batch_size, spec_on):
...         return 0.006 if spec_on else 0.005
>>> server = Server(make_policy(PolicyConfig(kind=PolicyKind.CALIBRATED)))
>>> step = server.step(Flat(), 4, lambda on: (3.0,) * 4 if on else None, QUIET, random.Random(1))
>>> (step.ran_on, step.seconds, step.obs.step_period_s, step.decision.reason.value)
(True, 0.006, 0.006, 'startup')
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from sgtrace.payload.calibrated import CalibratedPolicy
from sgtrace.payload.calibration import Calibration, bucket_of
from sgtrace.payload.cohort import largest
from sgtrace.payload.policy import Decision, Observation, Policy, PolicyConfig, Reason
from sgtrace.payload.rules import PolicyState
from sgtrace.payload.wave import wave_lengths
from sgtrace.payload.window import window_of_periods

LAG = 2  # the overlap scheduler: a decision on result k governs the launch of k + 2
# A switch with requests running (the plain off state retracts them all, drops the batch in
# flight for them and prefills them again, without CUDA graphs) costs ``SWITCH_FIXED + RETRACT
# * n`` plain steps at ``n`` requests (:func:`switch_steps`): live (an H100, the target at 24
# layers) a switch cost 5-16 plain steps with one request running, 5-16 with 16-61 and 9.5-11.5
# with 128 (calls 36 and 40-43: what the hook measured, `sgtrace.payload.switchcost`;
# `bench/results/live/sweep/README.md`, "Calls 40-43"): mostly fixed, the re-admitted
# requests' prefill a batch and the drained pipeline. Before (the sixteenth session) the
# charge was ``1 + n / 11``, from call 36's switches of 46-128 requests alone.
SWITCH_FIXED = 6.0
RETRACT = 1.0 / 16.0


def switch_steps(running: int, fixed: float = SWITCH_FIXED, retract: float = RETRACT) -> float:
    """Plain steps a switch with ``running`` requests running costs (none without any).

    >>> switch_steps(1), switch_steps(128), switch_steps(0)
    (6.0625, 14.0, 0.0)
    """
    return fixed + retract * running if running >= 1 else 0.0


class StepTimes(Protocol):
    """A machine: the seconds of one decode step of either state at a batch size."""

    def seconds(self, batch_size: int, spec_on: bool) -> float: ...


@dataclass(frozen=True)
class Noise:
    """Host noise of one step: a log-normal factor of ``sigma``, a share ``spikes`` of steps
    stretched ``spike`` times, and a share ``prefills`` of results the hook cannot time (a
    batch it did not see ran in between)."""

    sigma: float = 0.1
    spikes: float = 0.03
    spike: float = 5.0
    prefills: float = 0.05

    def mean(self) -> float:
        """The mean factor a step is stretched by: divide by it to keep a machine's mean."""
        return math.exp(self.sigma**2 / 2) * (1.0 + self.spikes * (self.spike - 1.0))


QUIET = Noise(sigma=0.0, spikes=0.0, prefills=0.0)


@dataclass(frozen=True)
class Step:
    """One simulated result: its batch size, the state that ran it, the step's seconds (noise
    included), the observation the policy got and its decision."""

    batch_size: int
    ran_on: bool
    seconds: float
    obs: Observation
    decision: Decision


class Constant:
    """A server that never switches: EAGLE-3 (``spec_on``) or no speculation."""

    def __init__(self, spec_on: bool) -> None:
        self.spec_on = spec_on
        self.config = PolicyConfig()

    def decide(self, obs: Observation) -> Decision:
        return Decision(self.spec_on, False, Reason.STEADY, obs.step, obs.batch_size, 0, None)


class StepsOnly:
    """A policy fed no interrupted periods (``Observation.interrupted_period_s`` dropped), as the
    hook fed it before it told them apart: what reading them gains."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.config = policy.config
        self.decides_arrivals = getattr(policy, "decides_arrivals", False)

    def decide(self, obs: Observation) -> Decision:
        return self.policy.decide(replace(obs, interrupted_period_s=None))


class OnResults:
    """A policy shown no arrivals (:meth:`Server.arrive`), only decode results, as the hook
    called it before it decided on arrivals: what deciding on them gains."""

    decides_arrivals = False

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.config = policy.config

    def decide(self, obs: Observation) -> Decision:
        return self.policy.decide(obs)


def seeded(
    config: PolicyConfig, machine: StepTimes, buckets: tuple[int, ...], samples: int = 8
) -> Policy:
    """The calibrated policy of ``config`` starting with both states' step times at every
    bucket of ``buckets`` already measured, ``samples`` periods each, as ``machine`` makes
    them: what a calibration at start-up (timing each state at each batch size before the
    first request) would give it. Decode steps only: no start-up tells how often prefills
    will interrupt them."""
    windows = [
        window_of_periods(
            on, bucket, (machine.seconds(bucket, on),) * samples, (bucket,) * samples, -1
        )
        for on in (False, True)
        for bucket in buckets
    ]
    return CalibratedPolicy(config, PolicyState(calibration=Calibration(windows=tuple(windows))))


class Server:
    """A policy and the decisions in flight (see the module docstring); the server launches
    in ``launched_on``."""

    def __init__(
        self,
        policy: Policy,
        launched_on: bool = True,
        lag: int = LAG,
        free_switches: bool = False,
    ) -> None:
        self.policy = policy
        self.lag = lag
        self.free_switches = free_switches
        self.decided = [launched_on] * (lag + 1)
        self.count = 0
        self.last_batch = 0  # the batch size of the latest result
        self.last_ran: bool | None = None  # the state of the latest step; None: idle since

    def arrive(self, batch_size: int, arriving: int, lengths: Sequence[int] = ()) -> bool:
        """``arriving`` requests came, of ``lengths`` new tokens each, all finishing by length,
        and the batch about to decode holds ``batch_size``: as the hook does, where that batch
        is in a larger bucket than the latest result's, a cohort of one length among them
        is (``sgtrace.payload.cohort``) or they make a wave (``sgtrace.payload.wave``), a
        policy that decides on arrivals (``decides_arrivals``) is asked, and its decision runs from the next step (the hook
        switches before the newcomers' prefill: no lag). Whether it toggled."""
        if not getattr(self.policy, "decides_arrivals", False) or arriving < 1:
            return False
        counts = Counter(lengths)
        cohort, wave = largest(counts), wave_lengths(counts, batch_size)
        if bucket_of(batch_size) <= bucket_of(self.last_batch) and not cohort.size and not wave:
            return False
        self.last_batch = max(batch_size, self.last_batch)
        obs = Observation(self.count, batch_size, None, self.spec_on, arriving=arriving, cohort=cohort.size, cohort_tokens=cohort.tokens, wave_lengths=wave)  # fmt: skip
        decision = self.policy.decide(obs)
        if decision.changed:
            self.decided = [decision.spec_on] * (self.lag + 1)
        return decision.changed

    @property
    def spec_on(self) -> bool:
        """The state the hook is in now (the latest decision)."""
        return self.decided[-1]

    def settle(self) -> None:
        """The server went idle: every decision in flight has taken effect (and the next
        switch retracts nothing)."""
        self.decided = [self.decided[-1]] * (self.lag + 1)
        self.last_ran = None

    def switch_s(self, machine: StepTimes, running: int) -> float:
        """Seconds a switch with ``running`` requests running costs (:func:`switch_steps`;
        none with ``free_switches``)."""
        if self.free_switches:
            return 0.0
        return switch_steps(running) * machine.seconds(running, False)

    def step(
        self,
        machine: StepTimes,
        batch_size: int,
        lengths: Callable[[bool], tuple[float, ...] | None],
        noise: Noise,
        rng: random.Random,
        scale: float = 1.0,
        is_timed: bool = True,
        before_s: float = 0.0,
    ) -> Step:
        """Run one decode step of ``batch_size`` requests and let the policy decide on its
        result. ``lengths(ran_on)``: the accept lengths of the verify (None when off);
        ``scale``: a factor on the step's seconds (a slow turn); ``is_timed``: False for a
        result the hook cannot time (``noise.prefills`` drops more); ``before_s``: seconds of
        other batches (a prefill) or idle time since the previous result, which the hook sees
        as an interrupted period. A step in another state than the previous one (not idle in
        between) pays the switch (:meth:`switch_s`) before it: in the step's seconds, and seen
        as a prefill."""
        ran_on = self.decided[-1 - self.lag]
        switch = 0.0
        if self.last_ran is not None and ran_on != self.last_ran:
            switch = self.switch_s(machine, batch_size) * scale
        self.last_ran = ran_on
        seconds = machine.seconds(batch_size, ran_on) * scale * rng.lognormvariate(0, noise.sigma)
        if rng.random() < noise.spikes:
            seconds *= noise.spike
        before_s, seconds = before_s + switch, seconds + switch
        period: float | None = None
        interrupted: float | None = None
        if is_timed and not rng.random() < noise.prefills:
            if before_s > 0:
                interrupted = before_s + seconds - switch
            else:
                period = seconds
        obs = Observation(
            self.count, batch_size, lengths(ran_on), self.spec_on, period, interrupted
        )
        decision = self.policy.decide(obs)
        self.decided.append(decision.spec_on)
        del self.decided[: -(self.lag + 1)]
        self.count += 1
        self.last_batch = batch_size
        return Step(batch_size, ran_on, seconds, obs, decision)
