"""A trace seen per scheduler step and rank: the decision in force and the calls that ran.

Which step a decision governs is read from the timeline, not from the hook's arguments: a
decision made inside a step's ``run_batch`` governs that step; one made outside (SGLang's hook
decides in the decode-result handler, after the next batch was already launched when the
overlap scheduler is on) governs the next ``run_batch`` that starts after it. A decision stays
in force until the next one, so every step after a rank's first decision has a governing
decision. Without recorded ``run_batch`` calls a decision governs its own recorded step.

>>> record = DecisionRecord(step=3, rank=0, batch_size=8, spec_on=False, changed=True,
...                         reason="high-load", accept_length=None)
>>> decision = Decision(record, pid=1, applies_to=5, start_ns=0)
>>> decision.record.was_on, decision.state
(True, 'off')
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sgtrace.errors import TraceReadError
from sgtrace.payload.record import DecisionRecord
from sgtrace.tracer.events import Role, TraceEvent
from sgtrace.tracer.load import Trace


@dataclass(frozen=True)
class Decision:
    """One decision the hook recorded (``record``, as the hook wrote it), where it lies in the
    trace: the process, the first scheduler step it governs (``applies_to``; ``None``: made
    after the last recorded step) and when it was made."""

    record: DecisionRecord
    pid: int
    applies_to: int | None
    start_ns: int

    @property
    def rank(self) -> int:
        return self.record.rank

    @property
    def spec_on(self) -> bool:
        return self.record.spec_on

    @property
    def state(self) -> str:
        return "on" if self.spec_on else "off"


@dataclass(frozen=True)
class StepRecord:
    """One rank's scheduler step: its calls, the decisions taking effect in it, and the
    decision in force (the last of those, else the one in force before)."""

    rank: int
    step: int
    events: tuple[TraceEvent, ...]  # calls other than decisions, by start time
    decisions: tuple[Decision, ...]
    governing: Decision | None

    @property
    def start_ns(self) -> int:
        return min(event.start_ns for event in self.events)

    def ran(self, role: Role) -> tuple[TraceEvent, ...]:
        return tuple(event for event in self.events if event.role is role)

    @property
    def is_decode(self) -> bool:
        """The scheduler or the speculative worker ran this step in decode mode."""
        launches = self.ran(Role.STEP) + self.ran(Role.SPEC_FORWARD)
        return any(event.facts.forward_mode == "DECODE" for event in launches)


def _decision(event: TraceEvent, applies_to: int | None) -> Decision:
    facts = event.facts
    if facts.spec_on is None or facts.hook_step is None or facts.batch_size is None:
        raise TraceReadError(
            f"a decision of pid {event.pid} at {event.start_ns} ns lacks spec_on, its step or "
            f"its batch size ({facts.describe() or 'no facts'}): the decision function must "
            "take a DecisionRecord (sgtrace_payload.record)"
        )
    record = DecisionRecord(
        step=facts.hook_step,
        rank=event.rank,
        batch_size=facts.batch_size,
        spec_on=facts.spec_on,
        changed=bool(facts.changed),
        reason=facts.reason or "",
        accept_length=facts.accept_length,
        step_period_s=facts.step_period_s,
        interrupted_period_s=facts.interrupted_period_s,
        source_rank=facts.source_rank,
        iteration=facts.iteration,
        arriving=facts.arriving or 0,
        cohort=facts.cohort or 0,
        cohort_tokens=facts.cohort_tokens or 0,
        wave_lengths=tuple(facts.wave_lengths or ()),
    )
    return Decision(record, pid=event.pid, applies_to=applies_to, start_ns=event.start_ns)


def _applies_to(
    event: TraceEvent, launches: Sequence[TraceEvent], starts: Sequence[int]
) -> int | None:
    """The step of the launch (``run_batch``) holding ``event``, else of the next one.

    ``starts``: the launches' start times, computed once per process (a list built per
    decision made validating a million-event trace quadratic)."""
    if not launches:
        return event.step
    index = bisect.bisect_right(starts, event.start_ns)
    if index and launches[index - 1].end_ns >= event.end_ns:
        return launches[index - 1].step
    return launches[index].step if index < len(launches) else None


def decisions_of(events: Sequence[TraceEvent]) -> tuple[Decision, ...]:
    """Every decision in ``events``, by rank and time, with the step it governs."""
    launches: dict[int, list[TraceEvent]] = {}
    for event in events:
        if event.role is Role.STEP and event.step is not None:
            launches.setdefault(event.pid, []).append(event)
    for pid_launches in launches.values():
        pid_launches.sort(key=lambda e: e.start_ns)
    starts = {pid: [e.start_ns for e in pid_launches] for pid, pid_launches in launches.items()}
    decisions = [
        _decision(event, _applies_to(event, launches.get(event.pid, []), starts.get(event.pid, [])))
        for event in events
        if event.role is Role.DECISION
    ]
    return tuple(sorted(decisions, key=lambda d: (d.rank, d.start_ns)))


def group_steps(events: Iterable[TraceEvent]) -> tuple[StepRecord, ...]:
    """Events grouped by (rank, step), sorted by rank then step, with decisions in force."""
    events = tuple(events)
    taking_effect: dict[tuple[int, int], list[Decision]] = {}
    for decision in decisions_of(events):
        if decision.applies_to is not None:
            taking_effect.setdefault((decision.rank, decision.applies_to), []).append(decision)
    calls: dict[tuple[int, int], list[TraceEvent]] = {}
    for event in events:
        if event.role is not Role.DECISION and event.step is not None:
            calls.setdefault((event.rank, event.step), []).append(event)
    records: list[StepRecord] = []
    governing: dict[int, Decision] = {}
    for rank, step in sorted(calls):
        decisions = tuple(taking_effect.get((rank, step), ()))
        if decisions:
            governing[rank] = decisions[-1]
        ranked = tuple(sorted(calls[(rank, step)], key=TraceEvent.sort_key))
        records.append(StepRecord(rank, step, ranked, decisions, governing.get(rank)))
    return tuple(records)


def trace_steps(trace: Trace) -> tuple[StepRecord, ...]:
    """:func:`group_steps` over a loaded trace."""
    return group_steps(trace.events)
