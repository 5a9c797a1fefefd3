"""What a runtime trace holds: processes, attached functions, and one event per recorded call.

The tracer plugin (``runtime.py``) writes one JSON line per completed call into
``events-<pid>.jsonl``; :mod:`sgtrace.tracer.load` turns those lines into the frozen values
below. Facts are a closed, typed set (:class:`Fact`, :class:`Facts`), not a free dict: every
consumer (validator, report, merged trace) reads the same names.

>>> event = parse_event(
...     {"fn": "m:W.verify", "role": "verify", "rank": 1, "step": 7, "t0": 10, "dur": 5,
...      "tid": 3, "facts": {"draft_width": 1}},
...     pid=42,
... )
>>> event.function.qualname, event.role, event.step, event.facts.draft_width
('W.verify', <Role.VERIFY: 'verify'>, 7, 1)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import Enum
from pathlib import Path

from sgtrace.errors import TraceReadError
from sgtrace.names import QualName


class Role(Enum):
    """What a selected function is for; the validator and report reason about roles, not names."""

    STEP = "step"  # the scheduler's run_batch: one call per scheduler step
    DECODE_RESULT = "decode_result"  # the decode-result handler (accept lengths)
    SPEC_FORWARD = "spec_forward"  # the speculative worker's forward_batch_generation
    DRAFT = "draft"
    DRAFT_FORWARD = "draft_forward"
    VERIFY = "verify"
    DRAFT_EXTEND_PREFILL = "draft_extend_prefill"
    DRAFT_EXTEND_DECODE = "draft_extend_decode"
    TARGET_FORWARD = "target_forward"  # the target worker's forward_batch_generation
    DECISION = "decision"  # the hook hands over a DecisionRecord (sgtrace_payload.record)
    OTHER = "other"  # selected by name, no known role


class Fact(Enum):
    """A small fact an extractor can read from a call. ``step`` overrides the process's own
    step for that event (``batch.forward_iter``: the step the batch was launched in)."""

    STEP = "step"
    BATCH_SIZE = "batch_size"
    FORWARD_MODE = "forward_mode"
    NUM_STEPS = "num_steps"
    DRAFT_WIDTH = "draft_width"
    TOPK = "topk"
    IS_VERIFY = "is_verify"
    ACCEPT_LENGTHS = "accept_lengths"
    ACCEPTED_DRAFTS = "accepted_drafts"
    SPEC_ON = "spec_on"
    CHANGED = "changed"
    REASON = "reason"
    ACCEPT_LENGTH = "accept_length"
    HOOK_STEP = "hook_step"  # the hook's own decode-step counter (DecisionRecord.step)
    STEP_PERIOD = "step_period_s"  # seconds since the rank's previous decode result (measure)
    INTERRUPTED_PERIOD = "interrupted_period_s"  # the same, other batches in between
    SOURCE_RANK = "source_rank"  # the rank whose policy took a carried decision
    ITERATION = "iteration"  # the scheduler loop iteration a carried decision was applied at
    ARRIVING = "arriving"  # a decision on that many requests arriving, not on a decode result
    COHORT = "cohort"  # of them, the most that finish by one length
    COHORT_TOKENS = "cohort_tokens"  # that length
    WAVE_LENGTHS = "wave_lengths"  # the lengths of those that finish by length


class Backend(Enum):
    """How the plugin sees calls: ``sys.monitoring`` (3.12+) or ``sys.setprofile``."""

    AUTO = "auto"
    MONITORING = "monitoring"
    PROFILE = "profile"


FactValue = int | float | bool | str | tuple[float, ...] | tuple[int, ...] | None


@dataclass(frozen=True)
class Facts:
    """The facts of one call; ``None`` where the extractor found nothing."""

    batch_size: int | None = None
    forward_mode: str | None = None
    num_steps: int | None = None
    draft_width: int | None = None
    topk: int | None = None
    is_verify: bool | None = None
    accept_lengths: tuple[float, ...] | None = None
    accepted_drafts: int | None = None
    spec_on: bool | None = None
    changed: bool | None = None
    reason: str | None = None
    accept_length: float | None = None
    hook_step: int | None = None
    step_period_s: float | None = None
    interrupted_period_s: float | None = None
    source_rank: int | None = None
    iteration: int | None = None
    arriving: int | None = None
    cohort: int | None = None
    cohort_tokens: int | None = None
    wave_lengths: tuple[int, ...] | None = None

    def get(self, fact: Fact) -> FactValue:
        """The value of ``fact`` (``None`` for ``step``, which lives on the event)."""
        return getattr(self, fact.value, None)

    def to_json(self) -> dict[str, object]:
        """The facts that are set, in field order."""
        out: dict[str, object] = {}
        for field in fields(self):
            value = getattr(self, field.name)
            if value is not None:
                out[field.name] = list(value) if isinstance(value, tuple) else value
        return out

    def describe(self) -> str:
        """``batch_size=4, num_steps=3``: for messages."""
        return ", ".join(f"{key}={value}" for key, value in self.to_json().items())

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Facts:
        """Read facts written by the plugin; unknown keys are ignored, wrong types refused."""
        values: dict[str, FactValue] = {}
        for field in fields(cls):
            if field.name in data and data[field.name] is not None:
                values[field.name] = _checked(field.name, data[field.name])
        return cls(**values)  # type: ignore[arg-type]


_KINDS: dict[str, tuple[type, ...]] = {
    "batch_size": (int,),
    "num_steps": (int,),
    "draft_width": (int,),
    "topk": (int,),
    "accepted_drafts": (int,),
    "hook_step": (int,),
    "source_rank": (int,),
    "iteration": (int,),
    "arriving": (int,),
    "cohort": (int,),
    "cohort_tokens": (int,),
    "forward_mode": (str,),
    "reason": (str,),
    "is_verify": (bool,),
    "spec_on": (bool,),
    "changed": (bool,),
    "accept_length": (int, float),
    "step_period_s": (int, float),
    "interrupted_period_s": (int, float),
}


def _checked(name: str, value: object) -> FactValue:
    if name == "accept_lengths":
        if isinstance(value, list) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
        ):
            return tuple(float(v) for v in value)
        raise ValueError(f"fact accept_lengths must be a list of numbers, not {value!r}")
    if name == "wave_lengths":
        if isinstance(value, list) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v == int(v) for v in value
        ):
            return tuple(int(v) for v in value)
        raise ValueError(f"fact wave_lengths must be a list of whole numbers, not {value!r}")
    kinds = _KINDS[name]
    is_bool = isinstance(value, bool)
    if not isinstance(value, kinds) or (is_bool and bool not in kinds):
        raise ValueError(f"fact {name} must be {kinds[0].__name__}, not {value!r}")
    if name in ("accept_length", "step_period_s", "interrupted_period_s"):
        return float(value)  # type: ignore[arg-type]
    return value  # type: ignore[return-value]


@dataclass(frozen=True)
class TraceEvent:
    """One completed call of a selected function in one process.

    Times are ``time.perf_counter_ns`` (CLOCK_MONOTONIC on Linux, shared by all processes).
    ``step`` is ``None`` when neither the scheduler nor an extractor gave one.
    """

    pid: int
    rank: int
    step: int | None
    start_ns: int
    duration_ns: int
    function: QualName
    role: Role
    thread: int
    facts: Facts
    error: str | None = None

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.duration_ns

    def sort_key(self) -> tuple[int, int, int, int, str]:
        """Rank, start, longer first (parents before children), pid, name: deterministic."""
        return (self.rank, self.start_ns, -self.duration_ns, self.pid, str(self.function))


@dataclass(frozen=True)
class ProcessInfo:
    """A Python process the plugin was installed in, from its file's first line."""

    pid: int
    ppid: int
    argv: tuple[str, ...]
    python: str
    backend: Backend
    path: Path


@dataclass(frozen=True)
class Attachment:
    """A selected function found (``is_attached``) or not found in one process."""

    pid: int
    function: QualName
    is_attached: bool
    detail: str


@dataclass(frozen=True)
class Note:
    """Something the plugin wanted the user to know (a fallback, an extractor failure)."""

    pid: int
    text: str


def parse_event(data: Mapping[str, object], pid: int) -> TraceEvent:
    """Build a :class:`TraceEvent` from a ``"call"`` line; raise ``TraceReadError`` if malformed."""
    try:
        step = data.get("step")
        return TraceEvent(
            pid=pid,
            rank=require_int(data.get("rank", 0)),
            step=None if step is None else require_int(step),
            start_ns=require_int(data["t0"]),
            duration_ns=require_int(data["dur"]),
            function=QualName.parse(str(data["fn"])),
            role=Role(data["role"]),
            thread=require_int(data.get("tid", 0)),
            facts=Facts.from_json(_mapping(data.get("facts", {}))),
            error=None if data.get("error") is None else str(data["error"]),
        )
    except (KeyError, ValueError, TypeError) as exc:
        raise TraceReadError(f"malformed call record ({exc}): {dict(data)!r}") from exc


def require_int(value: object) -> int:
    """``value`` if it is an ``int`` (not a ``bool``); else ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {value!r}")
    return value


def _mapping(value: object) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise ValueError(f"expected an object, got {value!r}")
    return value
