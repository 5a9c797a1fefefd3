"""What both policies remember and the rules they share: the start-up rule, the mean accept
length, the acceptance gate's breakeven, and how a proposal becomes the next state and decision.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from enum import Enum
from typing import Any

from .calibration import Calibration
from .policy import Decision, Observation, PolicyConfig, Reason


class Mode(Enum):
    """What the threshold policy is doing beyond the load rule."""

    NORMAL = "normal"  # the load rule decides
    HELD_OFF = "held-off"  # off for low acceptance, waiting to probe
    PROBING = "probing"  # on for a probe


@dataclass(frozen=True)
class BucketRates:
    """The measured goodputs of one bucket, in tokens per request-second, and the decoding
    clock (:attr:`PolicyState.clock_s`) when each was measured; None: not measured yet."""

    bucket: int
    on: float | None = None
    on_at: float | None = None
    off: float | None = None
    off_at: float | None = None


@dataclass(frozen=True)
class Block:
    """The results being measured: one bucket, one state, in a row; the goodput of each (all
    of them, or past a bound an even sample)."""

    bucket: int
    ran_on: bool
    seconds: float = 0.0
    results: int = 0
    goodputs: tuple[float, ...] = ()


@dataclass(frozen=True)
class PolicyState:
    """Everything a policy remembers between steps; small, frozen and serialisable.

    The threshold policy uses ``mode`` to ``low_steps``; the measured policy the accept mean,
    ``clock_s`` (seconds of decoding seen), ``warm_accept``, ``rates`` and ``block``; the
    calibrated policy ``mode`` to ``failed_probes`` and its model, ``calibration``.
    """

    mode: Mode = Mode.NORMAL
    last_step: int | None = None
    last_toggle_step: int | None = None
    accept_mean: float | None = None
    accept_samples: int = 0
    accept_var: float | None = None  # calibrated: the accept lengths' variance (EMA)
    accept_weight: float = 0.0  # calibrated: the accept lengths in the means, decayed
    wave_left: tuple[int, ...] = ()  # calibrated: a probed wave's lengths (its verdict's)
    wave_made: float = 0.0  # calibrated: the tokens each of its requests made since
    wave_at: int = -1  # calibrated: the step requests last arrived on an idle server
    wave_gap: int = -1  # calibrated: the steps from the arrival before to that one
    wave_bucket: int = 0  # calibrated: the bucket of the batch they made
    tail_lengths: tuple[int, ...] = ()  # calibrated: theirs, while none joined (:mod:`.tail`)
    tail_held: int = 0  # calibrated: the requests running where the tail last kept a switch
    tail_made: float = 0.0  # calibrated: the tokens each of the tail's requests made since
    switch_step: int = -1  # calibrated: a switch with requests running, pending measurement
    switch_running: int = 0  # calibrated: the requests it retracted
    switch_worst: float = 0.0  # calibrated: its largest interrupted period since
    switch_least: float = 0.0  # calibrated: its least consecutive period since (0: none)
    switch_fit: tuple[float, ...] = ()  # calibrated: what switches cost (:mod:`.switchcost`)
    failed_probes: int = 0
    low_steps: int = 0  # steps in a row with batch_size <= on_below, this one included
    clock_s: float = 0.0
    warm_accept: float | None = None  # mean accept length away from toggles (EMA)
    rates: tuple[BucketRates, ...] = ()
    block: Block | None = None
    calibration: Calibration | None = None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready values; :meth:`from_dict` reads them back."""
        return {**asdict(self), "mode": self.mode.value}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> PolicyState:
        entries: Any = data.get("rates", ())
        rates = tuple(BucketRates(**entry) for entry in entries)
        found: Any = data.get("block")
        block = None if found is None else Block(**{**found, "goodputs": tuple(found["goodputs"])})
        cal: Any = data.get("calibration")
        calibration = None if cal is None else Calibration.from_dict(cal)
        values = {**data, "mode": Mode(data["mode"]), "rates": rates, "block": block}
        values["wave_left"] = tuple(data.get("wave_left", ()))  # type: ignore[arg-type]
        values["switch_fit"] = tuple(data.get("switch_fit", ()))  # type: ignore[arg-type]
        values["tail_lengths"] = tuple(data.get("tail_lengths", ()))  # type: ignore[arg-type]
        return cls(**{**values, "calibration": calibration})  # type: ignore[arg-type]


@dataclass(frozen=True)
class Proposal:
    """What a policy's rules propose before the dwell: the state, why, and the mode after."""

    spec_on: bool
    reason: Reason
    mode: Mode = Mode.NORMAL
    failed_probes: int = 0


class StatefulPolicy:
    """A policy's state and :meth:`decide`; subclasses give the pure :meth:`advance`.

    ``decides_arrivals``: whether :meth:`advance` decides on arrivals (``Observation.arriving``);
    a policy that does not keeps its state and the running state on them.
    """

    decides_arrivals = False

    def __init__(self, config: PolicyConfig, state: PolicyState | None = None) -> None:
        self.config = config
        self.state = state if state is not None else PolicyState()

    def decide(self, obs: Observation) -> Decision:
        """The decision for ``obs``; advances the state."""
        if obs.arriving and not self.decides_arrivals:  # kept: state and decision alike
            steps = self.config.steps_for(obs.batch_size) if obs.spec_on else 0
            return Decision(
                obs.spec_on, False, Reason.STEADY, obs.step, obs.batch_size, steps, None
            )
        self.state, decision = self.advance(self.state, obs)
        return decision

    def advance(self, state: PolicyState, obs: Observation) -> tuple[PolicyState, Decision]:
        """The next state and the decision for ``obs``. Pure."""
        raise NotImplementedError


def mean(lengths: tuple[float, ...]) -> float:
    return math.fsum(lengths) / len(lengths)


def check_order(state: PolicyState, obs: Observation) -> None:
    if state.last_step is not None and obs.step < state.last_step:
        raise ValueError(f"step went back from {state.last_step} to {obs.step}: {obs!r}")


def observe(config: PolicyConfig, state: PolicyState, obs: Observation) -> PolicyState:
    """Count low-load steps and fold the accept lengths into the mean (only while ON)."""
    low_steps = state.low_steps + 1 if obs.batch_size <= config.on_below else 0
    state = replace(state, low_steps=low_steps)
    if not obs.spec_on or not obs.accept_lengths:
        return state
    batch_mean = mean(obs.accept_lengths)
    if state.accept_mean is None:
        accept = batch_mean
    else:
        accept = state.accept_mean + config.accept_ema_alpha * (batch_mean - state.accept_mean)
    return replace(state, accept_mean=accept, accept_samples=state.accept_samples + 1)


def startup(config: PolicyConfig, obs: Observation) -> Proposal:
    """The first decision: the load rule alone."""
    if obs.batch_size <= config.on_below:
        spec_on = True
    elif obs.batch_size >= config.off_above:
        spec_on = False
    else:
        spec_on = obs.spec_on
    return Proposal(spec_on, Reason.STARTUP)


def accepts_too_little(config: PolicyConfig, state: PolicyState, batch_size: int) -> bool:
    """The acceptance gate: the mean accept length below the breakeven."""
    breakeven = config.breakeven_accept_length(config.steps_for(batch_size))
    return (
        config.acceptance_gate and state.accept_mean is not None and state.accept_mean < breakeven
    )


def conclude(
    config: PolicyConfig,
    observed: PolicyState,
    obs: Observation,
    proposal: Proposal,
    keeps_accept_mean: bool,
) -> tuple[PolicyState, Decision]:
    """The next state and the decision for ``proposal``.

    A toggle starts a new block and, unless ``keeps_accept_mean``, measures acceptance afresh.
    """
    spec_on, reason = proposal.spec_on, proposal.reason
    changed = spec_on != obs.spec_on
    if changed:
        state = replace(
            observed,
            mode=proposal.mode,
            last_step=obs.step,
            last_toggle_step=obs.step,
            accept_mean=observed.accept_mean if keeps_accept_mean else None,
            accept_samples=observed.accept_samples if keeps_accept_mean else 0,
            failed_probes=proposal.failed_probes,
            block=None,
        )
    else:
        held = reason is Reason.DWELL_HOLD  # only the step moves on
        mode = observed.mode if held else proposal.mode
        failed = observed.failed_probes if held else proposal.failed_probes
        if (mode, obs.step, failed) == (observed.mode, observed.last_step, observed.failed_probes):
            state = observed  # nothing changes: no state to build
        else:
            state = replace(observed, mode=mode, last_step=obs.step, failed_probes=failed)
    steps = config.steps_for(obs.batch_size) if spec_on else 0
    decision = Decision(
        spec_on, changed, reason, obs.step, obs.batch_size, steps, observed.accept_mean
    )
    return state, decision
