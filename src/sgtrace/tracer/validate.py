"""Check a runtime trace: per scheduler step and rank, did the decision hold?

Every decode step with a decision in force (see :mod:`sgtrace.tracer.steps` for which step a
decision governs) is checked against the ON or OFF clauses of
:class:`~sgtrace.tracer.rules.StepRules`; at most one decision may take effect per step; every
rank must have the same decision in force in the same step; a decision carried from the
deciding rank (``sgtrace_payload.carry``) must be applied by every rank at the loop iteration
the deciding rank applied it; and, given a policy replay, each rank's own decisions must be the
policy's (carried copies are checked against the deciding rank's instead). Decode steps before
a rank's first decision run as launched and are not checked.
The result is a :class:`Verdict`, never an exception: the CLI turns it into exit 0 or 1.
A trace that cannot be read, or holds no decision at all, raises ``TraceReadError`` (exit 2).

>>> verdict = Verdict(violations=(), steps=4, ranks=(0, 1), decisions=8, is_policy_checked=False)
>>> print(verdict.render())
OK: 4 steps on ranks 0, 1 (8 decisions) hold the on/off rules and agree across ranks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sgtrace.errors import SgtraceError, TraceReadError
from sgtrace.payload.record import DecisionRecord
from sgtrace.tracer.events import TraceEvent
from sgtrace.tracer.load import Trace, hook_off_state, load_trace
from sgtrace.tracer.rules import Rule, StepRules, step_rules_for
from sgtrace.tracer.steps import Decision, StepRecord, decisions_of, trace_steps


@dataclass(frozen=True)
class Violation:
    """One broken rule: where (step, rank; ``None`` for all ranks), what was expected and seen."""

    step: int
    rank: int | None
    rule: Rule
    expected: str
    seen: str

    def __str__(self) -> str:
        where = f"step {self.step}, " + ("all ranks" if self.rank is None else f"rank {self.rank}")
        return f"{where} [{self.rule.value}]: expected {self.expected}; seen {self.seen}"


@dataclass(frozen=True)
class Verdict:
    """The outcome of validation: ``violations`` (sorted), and how much was checked."""

    violations: tuple[Violation, ...]
    steps: int
    ranks: tuple[int, ...]
    decisions: int
    is_policy_checked: bool
    notes: tuple[str, ...] = ()

    @property
    def is_valid(self) -> bool:
        return not self.violations

    @property
    def exit_code(self) -> int:
        return 0 if self.is_valid else 1

    def render(self) -> str:
        """A readable report: a summary line, then one line per violation, then notes."""
        decisions = _plural(self.decisions, "decision")
        scope = f"{_plural(self.steps, 'step')} on {_ranks(self.ranks)} ({decisions})"
        agree = " and agree across ranks"
        if self.is_policy_checked:
            agree = ", agree across ranks and follow the policy"
        if self.is_valid:
            lines = [f"OK: {scope} hold the on/off rules{agree}."]
        else:
            lines = [f"FAILED: {_plural(len(self.violations), 'violation')} in {scope}:"]
            lines += [f"  {violation}" for violation in self.violations]
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines)


class PolicyReplay(Protocol):
    """Redo the policy over one rank's decision records (in step order): the ``spec_on`` it
    expects for each (``sgtrace.hooks.replay.policy_replay``)."""

    def __call__(self, decisions: Sequence[DecisionRecord], /) -> Sequence[bool]: ...


def _call(event: TraceEvent) -> str:
    facts = event.facts.describe()
    return f"{event.function.qualname}({facts})"


def _ran(record: StepRecord) -> str:
    names = [event.function.qualname for event in record.events]
    return "ran " + ", ".join(names) if names else "no recorded calls"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def _ranks(ranks: Sequence[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def _check_step(record: StepRecord, decision: Decision, rules: StepRules) -> list[Violation]:
    out: list[Violation] = []
    for clause in rules.on if decision.spec_on else rules.off:
        offenders = clause.offenders(record.events)
        if offenders is None:
            continue
        seen = ", ".join(_call(e) for e in offenders) if offenders else f"none; {_ran(record)}"
        out.append(Violation(record.step, record.rank, clause.rule, clause.expected(), seen))
    return out


def _check_decisions(record: StepRecord) -> list[Violation]:
    # With the overlap scheduler two results can be processed between two decode launches (an
    # extend batch or an idle gap in between): both decisions take effect at the same launch,
    # and the later one governs it (the hook applies the latest decided state at launch; the
    # step rules check the launch against it). What must not happen is two decisions for one
    # decode result on one rank (a hook installed twice) that disagree. A decision on requests
    # arriving carries the next result's step and is that result's neighbour, not its twin.
    by_result: dict[tuple[int, bool], set[bool]] = {}
    for decision in record.decisions:
        key = (decision.record.step, decision.record.arriving > 0)
        by_result.setdefault(key, set()).add(decision.spec_on)
    if all(len(states) == 1 for states in by_result.values()):
        return []
    seen = f"{len(record.decisions)} ({', '.join(d.state for d in record.decisions)})"
    expected = "one decision per decode result"
    return [Violation(record.step, record.rank, Rule.ONE_DECISION, expected, seen)]


def _check_ranks(records: Sequence[StepRecord], ranks: Sequence[int]) -> list[Violation]:
    """Ranks that recorded a decode step must have the same decision in force in it."""
    by_step: dict[int, dict[int, StepRecord]] = {}
    for record in records:
        if record.is_decode and record.rank in ranks:
            by_step.setdefault(record.step, {})[record.rank] = record
    out: list[Violation] = []
    for step, ranked in sorted(by_step.items()):
        decided = {r: rec.governing for r, rec in ranked.items() if rec.governing is not None}
        missing = sorted(r for r in ranked if r not in decided)
        if not decided or (len({d.spec_on for d in decided.values()}) < 2 and not missing):
            continue
        seen = "; ".join(
            f"{state} at {_ranks([r for r in sorted(decided) if decided[r].state == state])}"
            for state in ("on", "off")
            if any(d.state == state for d in decided.values())
        )
        if missing:
            seen += f"; no decision yet at {_ranks(missing)}"
        out.append(Violation(step, None, Rule.RANKS_AGREE, "the same decision on every rank", seen))
    return out


def _toggle(decision: Decision) -> str:
    record = decision.record
    return f"{decision.state} of hook step {record.step} at iteration {record.iteration}"


def _check_carried(decisions: Sequence[Decision]) -> list[Violation]:
    """Each rank's carried decisions are the deciding rank's first one and toggles, applied at
    the same iterations."""
    own: dict[int, list[Decision]] = {}
    carried: dict[tuple[int, int], list[Decision]] = {}
    for decision in decisions:
        record = decision.record
        if record.is_carried and record.source_rank is not None:
            carried.setdefault((decision.rank, record.source_rank), []).append(decision)
        elif record.source_rank is not None and (record.changed or decision.rank not in own):
            own.setdefault(decision.rank, []).append(decision)
    out: list[Violation] = []
    for (rank, source), copies in sorted(carried.items()):
        expected = [_toggle(d) for d in own.get(source, [])]
        seen = [_toggle(d) for d in copies]
        if seen == expected:
            continue
        index = next(
            (i for i, pair in enumerate(zip(seen, expected, strict=False)) if pair[0] != pair[1]),
            min(len(seen), len(expected)),
        )
        sources = own.get(source, [])
        at = (copies[index] if index < len(copies) else sources[index]).applies_to
        out.append(
            Violation(
                -1 if at is None else at,
                rank,
                Rule.SAME_ITERATION,
                f"rank {source}'s carried decision #{index + 1}: "
                + (expected[index] if index < len(expected) else "none"),
                seen[index] if index < len(seen) else "none",
            )
        )
    return out


def _check_policy(decisions: Sequence[Decision], replay: PolicyReplay) -> list[Violation]:
    per_rank: dict[int, list[Decision]] = {}
    for decision in decisions:
        if not decision.record.is_carried:  # a copy: checked by _check_carried
            per_rank.setdefault(decision.rank, []).append(decision)
    out: list[Violation] = []
    for rank, decisions in sorted(per_rank.items()):
        expected = list(replay([decision.record for decision in decisions]))
        if len(expected) != len(decisions):
            raise SgtraceError(
                f"the policy replay returned {len(expected)} decisions for {len(decisions)} "
                f"steps of rank {rank}; it must return one per decision"
            )
        for decision, spec_on in zip(decisions, expected, strict=True):
            if spec_on != decision.spec_on:
                facts = (
                    f"hook step {decision.record.step}, batch_size={decision.record.batch_size}, "
                    f"accept_length={decision.record.accept_length}"
                )
                where = decision.applies_to if decision.applies_to is not None else -1
                out.append(
                    Violation(
                        where,
                        rank,
                        Rule.FOLLOWS_POLICY,
                        f"{'on' if spec_on else 'off'} (policy replay)",
                        f"{decision.state} ({decision.record.reason}; {facts})",
                    )
                )
    return out


def _checked(records: Sequence[StepRecord]) -> list[tuple[StepRecord, Decision]]:
    """The decode steps with a decision in force, and that decision."""
    out: list[tuple[StepRecord, Decision]] = []
    for record in records:
        if record.governing is not None and record.is_decode:
            out.append((record, record.governing))
    return out


def _order(violation: Violation) -> tuple[int, int, str, str]:
    rank = -1 if violation.rank is None else violation.rank
    return (violation.step, rank, violation.rule.value, violation.expected)


def check_trace(trace: Trace, rules: StepRules, replay: PolicyReplay | None = None) -> Verdict:
    """Validate a loaded trace against ``rules`` (pure); see the module docstring for the
    checks."""
    decisions = decisions_of(trace.events)
    if not decisions:
        raise TraceReadError(
            f"no decisions in {trace.directory}: the hook's decision record was not "
            "recorded. Was the hook directory attached (sgtrace trace --out HOOK_DIR) and the "
            "decision selected?"
        )
    records = trace_steps(trace)
    checked = _checked(records)
    if not checked:
        raise TraceReadError(
            f"{len(decisions)} decisions in {trace.directory} but no decode step they govern: "
            "is the scheduler's run_batch or the speculative worker's forward_batch_generation "
            "selected (their forward_mode tells decode steps)?"
        )
    violations: list[Violation] = []
    for record in records:
        violations += _check_decisions(record)
    for record, decision in checked:
        violations += _check_step(record, decision, rules)
    violations += _check_ranks(records, sorted({d.rank for d in decisions}))
    violations += _check_carried(decisions)
    if replay is not None:
        violations += _check_policy(decisions, replay)
    return Verdict(
        violations=tuple(sorted(violations, key=_order)),
        steps=len({record.step for record, _ in checked}),
        ranks=tuple(sorted({record.rank for record, _ in checked})),
        decisions=len(decisions),
        is_policy_checked=replay is not None,
        notes=trace.remarks(),
    )


def validate_trace(
    trace_dir: Path,
    *,
    rules: StepRules | None = None,
    replay: PolicyReplay | None = None,
) -> Verdict:
    """Load ``trace_dir`` and :func:`check_trace` it. ``TraceReadError`` if it cannot be read.

    ``rules``: by default those of the off state the hook config beside the trace names
    (:func:`~sgtrace.tracer.load.hook_off_state`: the plain off state's where there is none).
    """
    chosen = step_rules_for(hook_off_state(trace_dir)) if rules is None else rules
    return check_trace(load_trace(trace_dir), chosen, replay)
