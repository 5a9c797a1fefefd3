"""When to run EAGLE speculative decoding: a pure, replayable on/off policy.

Speculation pays at low concurrency, loses at high concurrency (the target turns compute bound
and verifying drafts costs real time), and loses everywhere when the draft predicts nothing.
This policy turns it OFF and ON from facts every tensor-parallel rank sees alike: decode step
counter, decode batch size, accept lengths of the last verify. No clock, no randomness, nothing
per rank, floats summed with :func:`math.fsum` (exactly rounded, so order-free): ranks fed the
same observations decide the same in the same step, and :func:`replay` redoes a recorded trace.

Rules (see :func:`advance`):

* **Load, with hysteresis**: OFF once ``batch_size >= off_above``; ON once
  ``batch_size <= on_below`` has held for more than ``on_delay_steps`` steps in a row; inside
  the band keep the current state. The delay keeps speculation off through the short dips of a
  loaded server (a wave of requests finishing together, a burst still arriving): a few
  speculative steps there cost more than they win, as they run at the next batch size.
* **Acceptance gate** (``acceptance_gate``): while ON, keep an exponential mean of accept
  lengths (tokens per verify, bonus token included: 1.0 means nothing accepted). A speculative
  step costs about ``1 + draft_cost_ratio * num_steps`` target steps (one verify plus
  ``num_steps`` draft forwards) and yields ``accept_length`` tokens; a plain step yields 1 token
  for 1 step. So the goodput ratio is ``accept_length / (1 + draft_cost_ratio * num_steps)``,
  speculation pays when it is >= 1.0, and the breakeven is
  ``min_accept_length = 1 + draft_cost_ratio * num_steps`` unless configured. A mean below it
  after ``min_accept_samples`` verifies turns speculation OFF (``low-acceptance``) at any load.
* **Probes**: after ``probe_interval_steps`` steps off for low acceptance, and while
  ``batch_size <= on_below``, turn ON for ``probe_steps`` verifies and judge again. A failed
  probe multiplies the wait by ``probe_backoff`` (at most ``max_probe_interval_steps``).
* **Dwell**: after the first decision, toggle only when ``min_dwell_steps`` steps have passed
  since the last toggle. Two toggles OFF do not wait for it: at a batch size of ``off_above`` or
  more speculation turns off at once, whatever the reason (a speculative step there costs more
  than a toggle, and a wave of arrivals that follows a dip would otherwise run speculatively
  for the whole dwell), and a failed probe ends at once: it lasts ``probe_steps`` verifies (a
  probe of a bad draft is a cost, paid as briefly as the measurement allows). Turning ON always
  waits, so there is at most one ON per dwell.
* **Measured** (``measure``): where the crossover lies depends on the machine as much as on
  the models (the host's speed decides how much of a speculative step's bookkeeping hides
  behind the GPU), so instead of the load rule, after the first step the policy measures (the
  acceptance gate stays, as below). Each decode result comes with the time since the previous
  one on this rank (``step_period_s``, taken by the hook, which leaves it ``None`` when another
  batch, a prefill, ran in between); its tokens per request (the mean accept length, or 1 when no verify ran) over
  that time is the decode goodput per request of the state that ran, by batch-size bucket (the
  next power of two). Per request, because the batch size can double within a bucket and the
  goodput of a batch with it: the off state of call 18 measured 11706 and then 7360 tokens/s in
  bucket 64 a second apart. Results in a row of one bucket and state make a measurement once they
  span ``measure_s`` seconds and ``measure_steps`` results; its value is the median of their
  goodputs, because the host's other work (requests arriving, 128 responses streamed at once)
  now and then stretches one step several times over, which weighs far more in a short plain
  step than in a speculative one: three 0.25 s means of the off state at 128 requests gave 160,
  143 and 89 tokens per request-second in a row (call 19), and the last chose speculation, which
  lost 26% there. Such costs come per token, in either state, so leaving them out of both is
  fair; a cost one state pays at a few of its steps is left out too. Prefills are left out because
  a loaded server runs them in waves: live (calls 15-16 of the benchmark), a measurement made in
  a wave's quiet part against one made in its busy part picked speculation at 64-128 requests,
  where it makes 0.8x. A speculative result counts its tokens at the accept length seen
  ``WARM_STEPS`` or more after the last toggle (an exponential mean): right after speculation
  turns back on, the requests that decoded while it was off accept less (with the cold off state
  their draft KV cache has holes: 2.27 against 3.41 tokens per verify in call 15) until they are
  replaced, a cost of the toggle, not of the state. Results within ``SETTLE_STEPS`` of a toggle
  straddle the switch and a period over ``IDLE_S`` is an idle server, not a step: neither counts.
  When a measurement of the state in force completes, the other state of that bucket is measured
  if it never was or its measurement is ``remeasure_s`` seconds of decoding old (``explore``),
  else the policy switches when the other's goodput exceeds this one's by ``measure_margin``
  (``measured``). With ``acceptance_gate``, a switch ON by measurement also needs the accept
  length of the last speculative results (their exponential mean, kept across toggles in this
  mode) at or above the breakeven: a draft that accepts too little is only explored (and turned
  off as soon as that measurement completes), never chosen (live, call 17: 0.25 s blocks chose a
  1.1-token draft at 2-8 requests, where it made 0.74-0.89x). Decode steps cannot see the extra
  prefill batches a speculating server runs (its requests end at scattered steps, so their
  replacements are prefilled one by one): at 64 requests of one length, speculation measures
  better per decode step and loses 9-18% end to end (calls 17-19).
  Decisions follow completed measurements, so no dwell applies. The clock makes decisions
  differ between ranks: the hook uses it at TP size 1 only. A recorded trace holds the
  periods, so a replay still decides alike.

Stdlib only, nothing from sgtrace: it is copied verbatim into the generated hook directory and
runs inside SGLang's processes. Config files and friendly errors: ``hooks/policy_config.py``.

>>> policy = policy_from_dict({"preset": "batch-size", "min_dwell_steps": 0})
>>> policy.decide(Observation(step=0, batch_size=40, accept_lengths=None, spec_on=True))
Decision(spec_on=False, changed=True, reason=<Reason.STARTUP: 'startup'>, step=0, batch_size=40, num_steps=0, accept_mean=None)
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from enum import Enum
from types import MappingProxyType


class Reason(Enum):
    """Why a decision is what it is."""

    STARTUP = "startup"  # first observation: load rule only, no dwell
    LOW_LOAD = "low-load"  # turned ON: batch_size <= on_below
    HIGH_LOAD = "high-load"  # turned OFF: batch_size >= off_above
    LOW_ACCEPTANCE = "low-acceptance"  # turned OFF: mean accept length below the breakeven
    PROBE = "probe"  # turned ON to measure acceptance again
    PROBE_PASSED = "probe-passed"  # a probe ended above the breakeven; stays ON
    EXPLORE = "explore"  # measure: the other state of this bucket is unmeasured or stale
    MEASURED = "measured"  # measure: the other state's goodput is the better by the margin
    DWELL_HOLD = "dwell-hold"  # a toggle was due but min_dwell_steps have not passed
    STEADY = "steady"  # nothing to change


class Mode(Enum):
    """What the policy is doing beyond the load rule."""

    NORMAL = "normal"  # the load rule decides
    HELD_OFF = "held-off"  # off for low acceptance, waiting to probe
    PROBING = "probing"  # on for a probe


@dataclass(frozen=True)
class Tier:
    """From ``min_batch_size`` up, run ``num_steps`` draft steps while speculation is ON.

    Advisory (reported in :attr:`Decision.num_steps`) for hooks that can change the step count;
    ON/OFF itself comes from ``on_below``/``off_above`` and the acceptance gate.
    """

    min_batch_size: int
    num_steps: int


@dataclass(frozen=True)
class PolicyConfig:
    """Every knob of the policy. Defaults are the ``default`` preset; see the module docstring.

    >>> PolicyConfig(draft_cost_ratio=0.25).breakeven_accept_length(num_steps=2)
    1.5
    """

    preset: str = "default"
    on_below: int = 8
    off_above: int = 16
    on_delay_steps: int = 0
    min_dwell_steps: int = 32
    acceptance_gate: bool = True
    num_steps: int = 3
    draft_cost_ratio: float = 0.1
    min_accept_length: float | None = None
    accept_ema_alpha: float = 0.125
    min_accept_samples: int = 32
    probe_interval_steps: int = 512
    probe_steps: int = 32
    probe_backoff: int = 2
    max_probe_interval_steps: int = 8192
    measure: bool = False
    measure_steps: int = 8
    measure_s: float = 0.25
    measure_margin: float = 0.03
    remeasure_s: float = 30.0
    tiers: tuple[Tier, ...] = ()

    def steps_for(self, batch_size: int) -> int:
        """Draft steps while ON at ``batch_size``: the last tier reached, else ``num_steps``."""
        steps = self.num_steps
        for tier in self.tiers:
            if batch_size >= tier.min_batch_size:
                steps = tier.num_steps
        return steps

    def breakeven_accept_length(self, num_steps: int) -> float:
        """``min_accept_length`` if set, else the goodput breakeven ``1 + ratio * num_steps``."""
        if self.min_accept_length is not None:
            return self.min_accept_length
        return 1.0 + self.draft_cost_ratio * num_steps

    def probe_interval(self, failed_probes: int) -> int:
        """Steps to wait before the next probe after ``failed_probes`` failures in a row."""
        return min(
            self.max_probe_interval_steps,
            self.probe_interval_steps * self.probe_backoff**failed_probes,
        )

    def to_dict(self) -> dict[str, object]:
        """JSON-ready values; :meth:`from_dict` gives back an equal config."""
        return {**asdict(self), "tiers": [asdict(tier) for tier in self.tiers]}

    def to_json(self) -> str:
        """The config as the JSON text written into the generated hook directory."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> PolicyConfig:
        """A config from JSON-decoded values: the ``preset`` (default ``default``), then ``data``.

        Only key names are checked here (``ValueError``); ``hooks/policy_config.py`` checks
        values and names the file and flag of each bad one.
        """
        preset = data.get("preset", "default")
        unknown = sorted(set(data) - set(CONFIG_KEYS))
        if unknown or preset not in PRESETS:
            raise ValueError(
                f"unknown policy keys {unknown} or preset {preset!r}; keys are "
                f"{', '.join(CONFIG_KEYS)} and presets {', '.join(sorted(PRESETS))}"
            )
        values = {**PRESETS[preset], **data}
        tiers = tuple(Tier(t["min_batch_size"], t["num_steps"]) for t in values["tiers"])
        min_accept = values["min_accept_length"]
        return cls(
            **{
                **values,
                "tiers": tiers,
                "draft_cost_ratio": float(values["draft_cost_ratio"]),
                "accept_ema_alpha": float(values["accept_ema_alpha"]),
                "measure_margin": float(values["measure_margin"]),
                "measure_s": float(values["measure_s"]),
                "remeasure_s": float(values["remeasure_s"]),
                "min_accept_length": None if min_accept is None else float(min_accept),
            }
        )


_DEFAULTS = {f.name: getattr(PolicyConfig(), f.name) for f in fields(PolicyConfig)}
CONFIG_KEYS: tuple[str, ...] = tuple(_DEFAULTS)
PRESETS: Mapping[str, Mapping[str, object]] = MappingProxyType(
    {
        "default": MappingProxyType(dict(_DEFAULTS)),
        "batch-size": MappingProxyType(
            {**_DEFAULTS, "preset": "batch-size", "acceptance_gate": False}
        ),
    }
)


def _is_int(value: object, low: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


@dataclass(frozen=True)
class Observation:
    """The rank-replicated facts of one decode step, read before scheduling it.

    ``step``: decode step counter (never decreases); ``batch_size``: requests in the decode
    batch; ``accept_lengths``: accepted tokens per request of the last verify, bonus token
    included (``None`` or empty when no verify ran; ignored while ``spec_on`` is false);
    ``spec_on``: whether speculation is on now; ``step_period_s``: seconds since the previous
    decode result on this rank (``None``: not timed; only a ``measure`` policy reads it).
    """

    step: int
    batch_size: int
    accept_lengths: tuple[float, ...] | None
    spec_on: bool
    step_period_s: float | None = None

    def __post_init__(self) -> None:
        if not _is_int(self.step) or not _is_int(self.batch_size):
            raise ValueError(f"step and batch_size must be integers >= 0: {self!r}")
        if self.accept_lengths is not None and not all(
            isinstance(a, (int, float)) and 1 <= a < math.inf for a in self.accept_lengths
        ):
            raise ValueError(
                f"accept lengths must be numbers >= 1.0 (bonus token included): {self!r}"
            )
        period = self.step_period_s
        if period is not None and not (isinstance(period, (int, float)) and 0 <= period < math.inf):
            raise ValueError(f"step_period_s must be a number of seconds >= 0 or None: {self!r}")

    def to_dict(self) -> dict[str, object]:
        """JSON-ready values, for recording a trace; :meth:`from_dict` reads them back."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Observation:
        lengths = data["accept_lengths"]
        return cls(**{**data, "accept_lengths": None if lengths is None else tuple(lengths)})


@dataclass(frozen=True)
class Decision:
    """What to run from this step on. ``changed``: ``spec_on`` differs from the observation's.

    ``num_steps`` is the advisory draft step count (0 when off); ``accept_mean`` the exponential
    mean of accept lengths since speculation last turned on (``None`` before any verify).
    """

    spec_on: bool
    changed: bool
    reason: Reason
    step: int
    batch_size: int
    num_steps: int
    accept_mean: float | None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready values, for recording a trace; :meth:`from_dict` reads them back."""
        return {**asdict(self), "reason": self.reason.value}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Decision:
        return cls(**{**data, "reason": Reason(data["reason"])})


@dataclass(frozen=True)
class PolicyState:
    """Everything the policy remembers between steps; small, frozen and serialisable."""

    mode: Mode = Mode.NORMAL
    last_step: int | None = None
    last_toggle_step: int | None = None
    accept_mean: float | None = None
    accept_samples: int = 0
    failed_probes: int = 0
    low_steps: int = 0  # steps in a row with batch_size <= on_below, this one included
    # measure: seconds of decoding seen (the periods summed), (bucket, on goodput, clock when
    # measured, off goodput, clock when measured) by bucket, goodputs in tokens per
    # request-second, and the block being measured: (bucket, ran on, seconds, results, the
    # goodputs of its results, every one or, past MAX_BLOCK_SAMPLE, an even sample)
    clock_s: float = 0.0
    warm_accept: float | None = None  # measure: mean accept length away from toggles (EMA)
    rates: tuple[tuple[int, float | None, float | None, float | None, float | None], ...] = ()
    block: tuple[int, bool, float, int, tuple[float, ...]] | None = None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready values; :meth:`from_dict` reads them back."""
        return {**asdict(self), "mode": self.mode.value}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> PolicyState:
        rates = tuple(tuple(entry) for entry in data.get("rates", ()))  # type: ignore[attr-defined]
        block = data.get("block")
        if block is not None:  # JSON made the tuples lists
            bucket, ran_on, seconds, results, goodputs = block  # type: ignore[misc]
            block = (bucket, ran_on, seconds, results, tuple(goodputs))
        return cls(**{**data, "mode": Mode(data["mode"]), "rates": rates, "block": block})


@dataclass(frozen=True)
class _Proposal:
    spec_on: bool
    reason: Reason
    mode: Mode
    failed_probes: int


def _observe(config: PolicyConfig, state: PolicyState, obs: Observation) -> PolicyState:
    """Fold the observation's accept lengths into the exponential mean (only while ON)."""
    if not obs.spec_on or not obs.accept_lengths:
        return state
    batch_mean = _mean(obs.accept_lengths)
    if state.accept_mean is None:
        mean = batch_mean
    else:
        mean = state.accept_mean + config.accept_ema_alpha * (batch_mean - state.accept_mean)
    return replace(state, accept_mean=mean, accept_samples=state.accept_samples + 1)


def _propose_when_on(config: PolicyConfig, state: PolicyState, obs: Observation) -> _Proposal:
    probing = state.mode is Mode.PROBING
    needed = config.probe_steps if probing else config.min_accept_samples
    measured = config.acceptance_gate and state.accept_samples >= needed
    if measured and _accepts_too_little(config, state, obs.batch_size):
        failed = state.failed_probes
        if probing and config.probe_interval(failed) < config.max_probe_interval_steps:
            failed += 1
        elif not probing:
            failed = 0
        return _Proposal(False, Reason.LOW_ACCEPTANCE, Mode.HELD_OFF, failed)
    if obs.batch_size >= config.off_above:
        mode = Mode.HELD_OFF if probing else Mode.NORMAL
        return _Proposal(False, Reason.HIGH_LOAD, mode, state.failed_probes)
    if probing and measured:
        return _Proposal(True, Reason.PROBE_PASSED, Mode.NORMAL, 0)
    return _Proposal(True, Reason.STEADY, state.mode, state.failed_probes)


def _propose_when_off(config: PolicyConfig, state: PolicyState, obs: Observation) -> _Proposal:
    low_load = obs.batch_size <= config.on_below
    if state.mode is Mode.NORMAL:
        if low_load and state.low_steps > config.on_delay_steps:
            return _Proposal(True, Reason.LOW_LOAD, Mode.NORMAL, state.failed_probes)
        return _Proposal(False, Reason.STEADY, Mode.NORMAL, state.failed_probes)
    since = obs.step - (state.last_toggle_step if state.last_toggle_step is not None else 0)
    if low_load and since >= config.probe_interval(state.failed_probes):
        return _Proposal(True, Reason.PROBE, Mode.PROBING, state.failed_probes)
    return _Proposal(False, Reason.STEADY, Mode.HELD_OFF, state.failed_probes)


def _startup(config: PolicyConfig, obs: Observation) -> _Proposal:
    if obs.batch_size <= config.on_below:
        spec_on = True
    elif obs.batch_size >= config.off_above:
        spec_on = False
    else:
        spec_on = obs.spec_on
    return _Proposal(spec_on, Reason.STARTUP, Mode.NORMAL, 0)


SETTLE_STEPS = 2  # measure: results this close after a toggle straddle the switch
WARM_STEPS = 128  # measure: speculative results this long after a toggle accept as usual
IDLE_S = 1.0  # measure: a longer period is a server that had nothing to do, not a step
MAX_BLOCK_SAMPLE = 256  # measure: the most goodputs a block keeps (a step stays O(1))


def bucket_of(batch_size: int) -> int:
    """The measuring bucket of a batch size: the next power of two (1, 2, 4, 8, ...)."""
    return 1 << max(0, batch_size - 1).bit_length()


def rates_at(
    state: PolicyState, batch_size: int
) -> tuple[int, float | None, float | None, float | None, float | None] | None:
    """The measured rates of ``batch_size``'s bucket: (bucket, on, when, off, when), or None."""
    bucket = bucket_of(batch_size)
    return next((entry for entry in state.rates if entry[0] == bucket), None)


def _mean(lengths: tuple[float, ...]) -> float:
    return math.fsum(lengths) / len(lengths)


def _measure(config: PolicyConfig, state: PolicyState, obs: Observation) -> PolicyState:
    """Fold this result's tokens and period into the block; a full block becomes a rate."""
    period = obs.step_period_s
    if period is None or not 0 < period <= IDLE_S or obs.batch_size < 1:
        return state
    clock = state.clock_s + period
    ran_on = bool(obs.accept_lengths)
    accepted = _mean(obs.accept_lengths) if obs.accept_lengths else 1.0
    since = None if state.last_toggle_step is None else obs.step - state.last_toggle_step
    warm = state.warm_accept
    if ran_on and (since is None or since > WARM_STEPS):
        warm = accepted if warm is None else warm + config.accept_ema_alpha * (accepted - warm)
    if since is not None and since <= SETTLE_STEPS:
        return replace(state, clock_s=clock, warm_accept=warm, block=None)
    per_request = (accepted if warm is None else warm) if ran_on else 1.0
    bucket = bucket_of(obs.batch_size)
    block = state.block
    if block is None or block[0] != bucket or block[1] != ran_on:
        block = (bucket, ran_on, 0.0, 0, ())
    seconds, results = block[2] + period, block[3] + 1
    goodputs = (*block[4], per_request / period)
    if len(goodputs) > MAX_BLOCK_SAMPLE:  # fast steps: keep every other one, a fair sample
        goodputs = goodputs[::2]
    if results < config.measure_steps or seconds < config.measure_s:
        block = (bucket, ran_on, seconds, results, goodputs)
        return replace(state, clock_s=clock, warm_accept=warm, block=block)
    rates = {entry[0]: entry for entry in state.rates}
    _, on, on_at, off, off_at = rates.get(bucket, (bucket, None, None, None, None))
    if ran_on:
        on, on_at = statistics.median(goodputs), clock
    else:
        off, off_at = statistics.median(goodputs), clock
    rates[bucket] = (bucket, on, on_at, off, off_at)
    rates_now = tuple(sorted(rates.values()))
    return replace(state, clock_s=clock, warm_accept=warm, rates=rates_now, block=None)


def _propose_measured(config: PolicyConfig, state: PolicyState, obs: Observation) -> _Proposal:
    """After a measurement of the state in force: explore the other, or take the better."""
    keep = _Proposal(obs.spec_on, Reason.STEADY, Mode.NORMAL, 0)
    entry = rates_at(state, obs.batch_size)
    if entry is None:
        return keep
    _, on, on_at, off, off_at = entry
    mine, mine_at, other, other_at = (
        (on, on_at, off, off_at) if obs.spec_on else (off, off_at, on, on_at)
    )
    if mine is None or mine_at != state.clock_s:  # no measurement of this state completed now
        return keep
    if obs.spec_on and _accepts_too_little(config, state, obs.batch_size):
        return _Proposal(False, Reason.LOW_ACCEPTANCE, Mode.NORMAL, 0)
    if other is None or other_at is None or state.clock_s - other_at >= config.remeasure_s:
        return _Proposal(not obs.spec_on, Reason.EXPLORE, Mode.NORMAL, 0)
    if other > mine * (1.0 + config.measure_margin):
        if not obs.spec_on and _accepts_too_little(config, state, obs.batch_size):
            return keep
        return _Proposal(not obs.spec_on, Reason.MEASURED, Mode.NORMAL, 0)
    return keep


def _accepts_too_little(config: PolicyConfig, state: PolicyState, batch_size: int) -> bool:
    """The acceptance gate of the measured mode: the last accept lengths below the breakeven."""
    breakeven = config.breakeven_accept_length(config.steps_for(batch_size))
    return (
        config.acceptance_gate and state.accept_mean is not None and state.accept_mean < breakeven
    )


def advance(
    config: PolicyConfig, state: PolicyState, obs: Observation
) -> tuple[PolicyState, Decision]:
    """One step of the policy: the next state and the decision for ``obs``. Pure.

    >>> state, decision = advance(PolicyConfig(), PolicyState(), Observation(0, 1, None, False))
    >>> decision.spec_on, decision.changed, decision.reason.value, state.last_toggle_step
    (True, True, 'startup', 0)
    """
    if state.last_step is not None and obs.step < state.last_step:
        raise ValueError(f"step went back from {state.last_step} to {obs.step}: {obs!r}")
    low_steps = state.low_steps + 1 if obs.batch_size <= config.on_below else 0
    observed = replace(_observe(config, state, obs), low_steps=low_steps)
    if config.measure:
        observed = _measure(config, observed, obs)
    if state.last_step is None:
        proposal = _startup(config, obs)
    elif config.measure:
        proposal = _propose_measured(config, observed, obs)
    elif obs.spec_on:
        proposal = _propose_when_on(config, observed, obs)
    else:
        proposal = _propose_when_off(config, observed, obs)
    spec_on, reason = proposal.spec_on, proposal.reason
    changed = spec_on != obs.spec_on
    probe_failed = state.mode is Mode.PROBING and reason is Reason.LOW_ACCEPTANCE
    off_at_high_load = not spec_on and obs.batch_size >= config.off_above
    exempt = reason is Reason.STARTUP or probe_failed or off_at_high_load or config.measure
    if changed and not exempt and state.last_toggle_step is not None:
        if obs.step - state.last_toggle_step < config.min_dwell_steps:
            spec_on, reason, changed = obs.spec_on, Reason.DWELL_HOLD, False
    if changed:  # a toggle: measure acceptance afresh
        new_state = replace(
            observed,
            mode=proposal.mode,
            last_step=obs.step,
            last_toggle_step=obs.step,
            accept_mean=observed.accept_mean if config.measure else None,
            accept_samples=observed.accept_samples if config.measure else 0,
            failed_probes=proposal.failed_probes,
            block=None,
        )
    elif reason is Reason.DWELL_HOLD:
        new_state = replace(observed, last_step=obs.step)
    else:
        new_state = replace(
            observed, mode=proposal.mode, last_step=obs.step, failed_probes=proposal.failed_probes
        )
    steps = config.steps_for(obs.batch_size) if spec_on else 0
    decision = Decision(
        spec_on, changed, reason, obs.step, obs.batch_size, steps, observed.accept_mean
    )
    return new_state, decision


class Policy:
    """The policy with its state: call :meth:`decide` once per decode step, on every rank.

    >>> policy = Policy(PolicyConfig(on_below=8, off_above=16, min_dwell_steps=0))
    >>> spec_on = False
    >>> for step, batch_size in enumerate([4, 20, 12, 8]):
    ...     decision = policy.decide(Observation(step, batch_size, None, spec_on))
    ...     spec_on = decision.spec_on
    ...     print(step, batch_size, spec_on, decision.reason.value)
    0 4 True startup
    1 20 False high-load
    2 12 False steady
    3 8 True low-load
    """

    def __init__(self, config: PolicyConfig, state: PolicyState | None = None) -> None:
        self.config = config
        self.state = state if state is not None else PolicyState()

    def decide(self, obs: Observation) -> Decision:
        """The decision for this step; advances the state."""
        self.state, decision = advance(self.config, self.state, obs)
        return decision


def replay(config: PolicyConfig, observations: Iterable[Observation]) -> list[Decision]:
    """The decisions a fresh policy makes over ``observations`` (a recorded trace)."""
    policy = Policy(config)
    return [policy.decide(obs) for obs in observations]


def policy_from_dict(data: Mapping[str, object]) -> Policy:
    """A fresh policy from JSON-decoded config values (as written by ``PolicyConfig.to_json``)."""
    return Policy(PolicyConfig.from_dict(data))
