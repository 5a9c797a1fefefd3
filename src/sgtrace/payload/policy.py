"""When to run EAGLE speculative decoding: the policies' shared types and configuration.

Speculation pays at low concurrency, loses at high concurrency (the target turns compute bound
and verifying drafts costs real time), and loses everywhere when the draft predicts nothing. A
policy turns it off and on from facts every tensor-parallel rank sees alike (:class:`Observation`:
the hook's decode-step counter, the batch size, the accept lengths of the last verify), so ranks
fed the same observations decide the same in the same step, and a recorded trace can be replayed.

Three policies implement :class:`Policy` (see :mod:`.policies`; :class:`PolicyKind` picks one):
:mod:`.calibrated` (``kind = "calibrated"``, offline-tested only: each state's step time by batch size, measured by the server
on itself, and the accept length it sees; no per-machine constant), :mod:`.threshold` (the load
rule with hysteresis, an acceptance gate and probes; the default) and :mod:`.measured` (each state's measured
goodput per batch-size bucket). The policies that read a clock decide on one rank and the
decision is carried to the others (:mod:`.carry`). Config files and friendly errors:
``sgtrace.hooks.policy_config``.

>>> PolicyConfig(draft_cost_ratio=0.25).breakeven_accept_length(num_steps=2)
1.5
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from enum import Enum
from types import MappingProxyType
from typing import Protocol


class Reason(Enum):
    """Why a decision is what it is."""

    STARTUP = "startup"  # first observation: load rule only, no dwell
    LOW_LOAD = "low-load"  # turned ON: batch_size <= on_below
    HIGH_LOAD = "high-load"  # turned OFF: batch_size >= off_above
    LOW_ACCEPTANCE = "low-acceptance"  # turned OFF: mean accept length below the breakeven
    PROBE = "probe"  # turned ON to measure acceptance again
    PROBE_PASSED = "probe-passed"  # a probe ended above the breakeven; stays ON
    EXPLORE = "explore"  # measured: the other state of this bucket is unmeasured or stale
    MEASURED = "measured"  # measured: the other state's goodput is the better by the margin
    ARRIVAL = "arrival"  # turned OFF: off is the better at the batch requests arrived to
    COHORT = "cohort"  # OFF: a cohort of one length arrived, in step only without speculation
    DWELL_HOLD = "dwell-hold"  # a toggle was due but min_dwell_steps have not passed
    TAIL = "tail"  # a toggle was due but a wave's tail ends before the switch pays for itself
    STEADY = "steady"  # nothing to change
    FORCED = "forced"  # toggle_every_steps: flipped on schedule, for correctness tests


class PolicyKind(Enum):
    """Which policy decides."""

    CALIBRATED = "calibrated"  # each state's measured step time by batch size
    THRESHOLD = "threshold"  # the load rule: constants on_below/off_above
    MEASURED = "measured"  # measured goodput per bucket (also selected by ``measure = true``)
    FORCED = "forced"  # flips every toggle_every_steps results, for correctness tests


@dataclass(frozen=True)
class Tier:
    """From ``min_batch_size`` up, run ``num_steps`` draft steps while speculation is ON.

    Advisory (reported in :attr:`Decision.num_steps`) for hooks that can change the step count.
    """

    min_batch_size: int
    num_steps: int


@dataclass(frozen=True)
class PolicyConfig:
    """Every setting of the policies; the defaults are the ``default`` preset: the calibrated
    policy (``kind``), which measures its own step times; the load rule's settings below are the
    ``threshold`` and ``batch-size`` presets'.

    Load rule: OFF once ``batch_size >= off_above``; ON once ``batch_size <= on_below`` held for
    more than ``on_delay_steps`` steps; toggles at least ``min_dwell_steps`` apart (off at high
    load does not wait). Acceptance gate (``acceptance_gate``): OFF when the exponential mean
    (``accept_ema_alpha``) of accept lengths over ``min_accept_samples`` verifies is below the
    breakeven (:meth:`breakeven_accept_length`); probes after ``probe_interval_steps``, lasting
    ``probe_steps``, backing off by ``probe_backoff`` up to ``max_probe_interval_steps``.
    ``measure``: the measured policy instead of the load rule (``measure_steps`` results over
    ``measure_s`` seconds make a measurement; a switch needs ``measure_margin``; a measurement
    older than ``remeasure_s`` is made again). ``num_steps``/``tiers``: draft steps while on.
    ``kind``: the policy (``measure = true`` also selects the measured one). The calibrated
    policy's settings (``window_results``, ``min_samples``, ``probe_share``, ``min_margin``,
    ``margin_z``; each default's reason is in :mod:`.calibrated`) are statistics, not properties
    of a machine; it also uses ``accept_ema_alpha``, ``probe_backoff``,
    ``max_probe_interval_steps`` and, until both states are measured, the breakeven above.
    """

    preset: str = "default"
    kind: PolicyKind = PolicyKind.CALIBRATED
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
    window_results: int = 16
    min_samples: int = 8
    probe_share: float = 0.03125
    min_margin: float = 0.02
    margin_z: float = 2.0
    tiers: tuple[Tier, ...] = ()
    toggle_every_steps: int = 0

    @property
    def chosen(self) -> PolicyKind:
        """The policy that decides: forced toggles when ``toggle_every_steps`` is set, the
        measured one when ``measure`` is, else ``kind``."""
        if self.toggle_every_steps > 0:
            return PolicyKind.FORCED
        return PolicyKind.MEASURED if self.measure else self.kind

    @property
    def reads_clock(self) -> bool:
        """Whether the policy reads step periods (so ranks would decide apart on their own)."""
        return self.chosen not in (PolicyKind.THRESHOLD, PolicyKind.FORCED)

    def steps_for(self, batch_size: int) -> int:
        """Draft steps while ON at ``batch_size``: the last tier reached, else ``num_steps``."""
        steps = self.num_steps
        for tier in self.tiers:
            if batch_size >= tier.min_batch_size:
                steps = tier.num_steps
        return steps

    def breakeven_accept_length(self, num_steps: int) -> float:
        """``min_accept_length`` if set, else ``1 + draft_cost_ratio * num_steps``.

        A speculative step costs about one verify plus ``num_steps`` draft forwards, each
        ``draft_cost_ratio`` of a target step, and yields ``accept_length`` tokens; a plain step
        yields one token: speculation pays at or above this accept length.
        """
        if self.min_accept_length is not None:
            return self.min_accept_length
        return 1.0 + self.draft_cost_ratio * num_steps

    def probe_interval(self, failed_probes: int) -> int:
        """Steps to wait before the next probe after ``failed_probes`` failures in a row."""
        wait: int = self.probe_interval_steps * self.probe_backoff**failed_probes
        return min(self.max_probe_interval_steps, wait)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready values; :meth:`from_dict` gives back an equal config."""
        return {
            **asdict(self),
            "kind": self.kind.value,
            "tiers": [asdict(tier) for tier in self.tiers],
        }

    def to_json(self) -> str:
        """The config as JSON text."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> PolicyConfig:
        """A config from JSON-decoded values: the ``preset`` (default ``default``), then ``data``.

        Only key names are checked here (``ValueError``); ``sgtrace.hooks.policy_config``
        checks values and names the file and flag of each bad one.
        """
        preset = data.get("preset", "default")
        unknown = sorted(set(data) - set(CONFIG_KEYS))
        if unknown or not isinstance(preset, str) or preset not in PRESETS:
            raise ValueError(
                f"unknown policy keys {unknown} or preset {preset!r}; keys are "
                f"{', '.join(CONFIG_KEYS)} and presets {', '.join(sorted(PRESETS))}"
            )
        values: dict[str, object] = {**PRESETS[preset], **data}
        tiers = tuple(Tier(t["min_batch_size"], t["num_steps"]) for t in values["tiers"])  # type: ignore[attr-defined]
        floats = ("draft_cost_ratio", "accept_ema_alpha", "measure_margin", "measure_s")
        more = ("remeasure_s", "probe_share", "min_margin", "margin_z")
        converted = {key: float(values[key]) for key in (*floats, *more)}  # type: ignore[arg-type]
        minimum = values["min_accept_length"]
        return cls(
            **{
                **values,
                **converted,
                "kind": PolicyKind(values["kind"]),
                "tiers": tiers,
                "min_accept_length": None if minimum is None else float(minimum),  # type: ignore[arg-type]
            }
        )


_DEFAULTS = {f.name: PolicyConfig().to_dict()[f.name] for f in fields(PolicyConfig)} | {"tiers": ()}
CONFIG_KEYS: tuple[str, ...] = tuple(_DEFAULTS)
PRESETS: Mapping[str, Mapping[str, object]] = MappingProxyType(
    {
        "default": MappingProxyType(dict(_DEFAULTS)),
        "threshold": MappingProxyType({**_DEFAULTS, "preset": "threshold", "kind": "threshold"}),
        "calibrated": MappingProxyType({**_DEFAULTS, "preset": "calibrated", "kind": "calibrated"}),
        "batch-size": MappingProxyType(
            {**_DEFAULTS, "preset": "batch-size", "kind": "threshold", "acceptance_gate": False}
        ),
    }
)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_seconds(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < math.inf


@dataclass(frozen=True)
class Observation:
    """The rank-replicated facts of one decode step, read after its result.

    ``step``: decode step counter (never decreases); ``batch_size``: requests in the decode
    batch; ``accept_lengths``: accepted tokens per request of the last verify, bonus token
    included (``None`` or empty when no verify ran; ignored while ``spec_on`` is false);
    ``spec_on``: whether speculation is on now; ``step_period_s``: seconds since the previous
    decode result on this rank, the two results consecutive batches (``None``: not timed, or
    another batch ran in between); ``interrupted_period_s``: the same seconds where other
    batches (a prefill, or idle time and a prefill) ran in between (``None`` otherwise). At
    most one of the two is set; only the policies that read a clock use them.

    ``arriving`` above 0: not a decode result but requests arriving (that many), read when the
    scheduler receives them, before their prefill: ``batch_size`` is then the batch they make
    with the requests still running, ``step`` the next result's, and no period or accept length
    is set. The hook sends one where the batch grows into a larger bucket
    (:func:`~.calibration.bucket_of`); a decision on it takes effect before the batch's first
    decode step, not two results later (the calibrated policy decides on it, the others keep
    their state). ``cohort`` (an arrival's, :mod:`.cohort`): the most requests among those
    received since the latest result that ask for one length, ``cohort_tokens``, and ignore
    the end of sequence (0: fewer than :data:`~.cohort.MIN_COHORT`); ``wave_lengths``: the
    new tokens of each of those requests, ascending (:mod:`.wave`).

    The values are checked where one is made; the hook builds its own unchecked
    (:func:`~.frozen.build`), from its own counters and clock and :func:`~.facts.accept_lengths`,
    which check each of the kind (at 16 requests the checks cost a tenth of its call).
    """

    step: int
    batch_size: int
    accept_lengths: tuple[float, ...] | None
    spec_on: bool
    step_period_s: float | None = None
    interrupted_period_s: float | None = None
    arriving: int = 0
    cohort: int = 0
    cohort_tokens: int = 0
    wave_lengths: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not _is_count(self.step) or not _is_count(self.batch_size):
            raise ValueError(f"step and batch_size must be integers >= 0: {self!r}")
        if not all(_is_count(n) for n in (self.arriving, self.cohort, self.cohort_tokens)):
            raise ValueError(f"arriving and the cohort must be integers >= 0: {self!r}")
        if (self.cohort or self.wave_lengths) and not self.arriving:
            raise ValueError(f"a cohort is told on an arrival only: {self!r}")
        if not all(_is_count(n) and n > 0 for n in self.wave_lengths):
            raise ValueError(f"wave lengths must be integers >= 1: {self!r}")
        if self.arriving and (
            self.accept_lengths
            or self.step_period_s is not None
            or self.interrupted_period_s is not None
        ):
            raise ValueError(
                f"an arrival is no decode result: no accept length nor period: {self!r}"
            )
        if self.accept_lengths is not None and not all(
            _is_seconds(a) and a >= 1 for a in self.accept_lengths
        ):
            raise ValueError(
                f"accept lengths must be numbers >= 1.0 (bonus token included): {self!r}"
            )
        for period in (self.step_period_s, self.interrupted_period_s):
            if period is not None and not _is_seconds(period):
                raise ValueError(f"step periods must be numbers of seconds >= 0 or None: {self!r}")
        if self.step_period_s is not None and self.interrupted_period_s is not None:
            raise ValueError(f"a period is either consecutive or interrupted, not both: {self!r}")

    def to_dict(self) -> dict[str, object]:
        """JSON-ready values; :meth:`from_dict` reads them back."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Observation:
        lengths, wave = data["accept_lengths"], data.get("wave_lengths", ())
        return cls(**{**data, "accept_lengths": None if lengths is None else tuple(lengths), "wave_lengths": tuple(wave)})  # type: ignore[arg-type]  # fmt: skip


@dataclass(frozen=True)
class Decision:
    """What to run from this step on. ``changed``: ``spec_on`` differs from the observation's.

    ``num_steps`` is the advisory draft step count (0 when off); ``accept_mean`` the exponential
    mean of accept lengths the policy holds (``None`` before any verify).
    """

    spec_on: bool
    changed: bool
    reason: Reason
    step: int
    batch_size: int
    num_steps: int
    accept_mean: float | None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready values; :meth:`from_dict` reads them back."""
        return {**asdict(self), "reason": self.reason.value}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Decision:
        return cls(**{**data, "reason": Reason(data["reason"])})  # type: ignore[arg-type]


class Policy(Protocol):
    """A policy with its state: :meth:`decide` once per decode step, on every rank."""

    @property
    def config(self) -> PolicyConfig: ...

    def decide(self, obs: Observation) -> Decision:
        """The decision for ``obs``; advances the policy's state."""
        ...
