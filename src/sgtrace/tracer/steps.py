"""A trace seen per scheduler step and rank: the hook's decision and the calls that ran.

Both the validator and the report read a trace this way. Events without a step (calls before
the scheduler's first step) belong to no step and are left out.

>>> decision = Decision(step=3, rank=0, pid=1, batch_size=8, spec_on=False, changed=True,
...                     reason="high-load", accept_length=None, start_ns=0)
>>> decision.was_on
True
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sgtrace.errors import TraceReadError
from sgtrace.tracer.events import Role, TraceEvent
from sgtrace.tracer.load import Trace


@dataclass(frozen=True)
class Decision:
    """One ``sgtrace_hook.record_decision`` call: what the hook decided for ``step``.

    ``was_on`` is the state before the decision (``spec_on`` unless it ``changed``): with
    ``batch_size`` and ``accept_length`` it is what a policy replay observes.
    """

    step: int
    rank: int
    pid: int
    batch_size: int | None
    spec_on: bool
    changed: bool
    reason: str
    accept_length: float | None
    start_ns: int

    @property
    def was_on(self) -> bool:
        return self.spec_on != self.changed

    @property
    def state(self) -> str:
        return "on" if self.spec_on else "off"

    @classmethod
    def from_event(cls, event: TraceEvent) -> Decision:
        facts = event.facts
        if event.step is None or facts.spec_on is None:
            raise TraceReadError(
                f"a decision of pid {event.pid} at {event.start_ns} ns lacks its step or "
                f"spec_on ({facts.describe() or 'no facts'}): record_decision must be called "
                "as record_decision(step=int, rank=int, batch_size=int, spec_on=bool, ...)"
            )
        return cls(
            step=event.step,
            rank=event.rank,
            pid=event.pid,
            batch_size=facts.batch_size,
            spec_on=facts.spec_on,
            changed=bool(facts.changed),
            reason=facts.reason or "",
            accept_length=facts.accept_length,
            start_ns=event.start_ns,
        )


@dataclass(frozen=True)
class StepRecord:
    """Everything one rank recorded for one scheduler step."""

    rank: int
    step: int
    decisions: tuple[Decision, ...]
    events: tuple[TraceEvent, ...]  # calls other than decisions, by start time

    @property
    def start_ns(self) -> int:
        starts = [e.start_ns for e in self.events] + [d.start_ns for d in self.decisions]
        return min(starts)

    @property
    def decision(self) -> Decision | None:
        """The step's decision (the last one if the hook recorded several)."""
        return self.decisions[-1] if self.decisions else None

    def ran(self, role: Role) -> tuple[TraceEvent, ...]:
        return tuple(event for event in self.events if event.role is role)

    @property
    def is_decode(self) -> bool:
        """The speculative worker ran this step in decode mode."""
        return any(e.facts.forward_mode == "DECODE" for e in self.ran(Role.SPEC_FORWARD))


def group_steps(events: Iterable[TraceEvent]) -> tuple[StepRecord, ...]:
    """Events grouped by (rank, step), sorted by rank then step."""
    decisions: dict[tuple[int, int], list[Decision]] = {}
    calls: dict[tuple[int, int], list[TraceEvent]] = {}
    for event in events:
        if event.role is Role.DECISION:
            decision = Decision.from_event(event)
            decisions.setdefault((decision.rank, decision.step), []).append(decision)
        elif event.step is not None:
            calls.setdefault((event.rank, event.step), []).append(event)
    keys = sorted(set(decisions) | set(calls))
    return tuple(
        StepRecord(
            rank,
            step,
            tuple(sorted(decisions.get((rank, step), []), key=lambda d: d.start_ns)),
            tuple(sorted(calls.get((rank, step), []), key=TraceEvent.sort_key)),
        )
        for rank, step in keys
    )


def trace_steps(trace: Trace) -> tuple[StepRecord, ...]:
    """:func:`group_steps` over a loaded trace."""
    return group_steps(trace.events)
