"""What a decode step must and must not run when speculation is decided on, and when off.

Data, not code: a :class:`StepRules` holds one list of :class:`Clause` for ON steps and one
for OFF steps. A clause says that at least one event matching any of its :class:`Match`
must run (``MUST_RUN``), or that none may (``MUST_NOT_RUN``). What OFF steps must run depends on
what "off" ran (:class:`OffState`): the hook's plain decode path (:data:`PLAIN_OFF_STEP_RULES`)
or upstream's zero-step state (:data:`ZERO_STEP_RULES`, also the rules of traces of hooks
before the plain off state); a hook whose "off" runs something else describes it with its own
rules (``StepRules.from_dict``).

A fact test on a fact the trace does not have does not match: a ``MUST_NOT_RUN`` clause is
only violated by what the trace proves.

>>> print(ZERO_STEP_RULES.off[0].expected())
no draft with num_steps > 1, no draft_forward with num_steps > 1
>>> StepRules.from_dict(ZERO_STEP_RULES.to_dict()) == ZERO_STEP_RULES
True
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

from sgtrace.errors import ConfigError
from sgtrace.payload.config import PLAIN_OFF
from sgtrace.tracer.events import Fact, Facts, Role, TraceEvent


class OffState(Enum):
    """What a decode step decided off ran, which picks the rules it is held to."""

    PLAIN = PLAIN_OFF  # the hook's off state: the scheduler's plain decode path
    ZERO_STEP = "zero-step"  # upstream's zero-step state (a one-token verify); older hooks


class Rule(Enum):
    """The checks of ``sgtrace validate``; each violation names one."""

    ON_STEP = "on-step"  # a step decided on ran draft and verify
    OFF_STEP = "off-step"  # a step decided off ran no multi-step draft, a 1-token verify
    DRAFT_STATE = "draft-state"  # while off, the draft state was kept current
    RANKS_AGREE = "ranks-agree"  # every rank made the same decision in the same step
    FOLLOWS_POLICY = "follows-policy"  # decisions are those the policy makes on replay
    ONE_DECISION = "one-decision"  # one decision per decode result and rank
    SAME_ITERATION = "same-iteration"  # a carried decision applied at one iteration everywhere


class Need(Enum):
    MUST_RUN = "must-run"
    MUST_NOT_RUN = "must-not-run"


class Op(Enum):
    EQ = "=="
    NE = "!="
    GT = ">"
    GE = ">="
    LT = "<"
    LE = "<="


# What a fact test compares: a fact's value (not None) with the test's value. Values of
# different kinds (a str with an int) raise TypeError, which ``FactTest.holds`` catches.
_Operand = int | float | bool | str | tuple[float, ...]

_COMPARE: Mapping[Op, Callable[[_Operand, _Operand], object]] = {
    Op.EQ: operator.eq,
    Op.NE: operator.ne,
    Op.GT: operator.gt,
    Op.GE: operator.ge,
    Op.LT: operator.lt,
    Op.LE: operator.le,
}


@dataclass(frozen=True)
class FactTest:
    """``fact op value``, for example ``num_steps > 1``."""

    fact: Fact
    op: Op
    value: int | float | bool | str

    def holds(self, facts: Facts) -> bool:
        seen = facts.get(self.fact)
        if seen is None:
            return False
        try:
            return bool(_COMPARE[self.op](seen, self.value))
        except TypeError:  # a str compared with an int: the test does not hold
            return False

    def __str__(self) -> str:
        return f"{self.fact.value} {self.op.value} {self.value}"


@dataclass(frozen=True)
class Match:
    """Events of ``role`` whose facts pass every test of ``where``."""

    role: Role
    where: tuple[FactTest, ...] = ()

    def matches(self, event: TraceEvent) -> bool:
        return event.role is self.role and all(test.holds(event.facts) for test in self.where)

    def __str__(self) -> str:
        tests = " and ".join(str(test) for test in self.where)
        return f"{self.role.value} with {tests}" if tests else self.role.value


@dataclass(frozen=True)
class Clause:
    """At least one event matching ``any_of`` must run, or none may; ``rule`` names the check."""

    rule: Rule
    need: Need
    any_of: tuple[Match, ...]

    def offenders(self, events: tuple[TraceEvent, ...]) -> tuple[TraceEvent, ...] | None:
        """``None`` when the clause holds; else the events that break it (empty for a missing
        event)."""
        hits = tuple(e for e in events if any(m.matches(e) for m in self.any_of))
        if self.need is Need.MUST_RUN:
            return None if hits else ()
        return hits or None

    def expected(self) -> str:
        if self.need is Need.MUST_RUN:
            return " or ".join(str(match) for match in self.any_of)
        return ", ".join(f"no {match}" for match in self.any_of)


@dataclass(frozen=True)
class StepRules:
    """The clauses for steps decided on, and for steps decided off."""

    on: tuple[Clause, ...]
    off: tuple[Clause, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "on": [_clause_dict(c) for c in self.on],
            "off": [_clause_dict(c) for c in self.off],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> StepRules:
        """Rules from JSON-decoded data (as :meth:`to_dict` writes); ``ConfigError`` if invalid."""
        try:
            return cls(_clauses(data["on"]), _clauses(data["off"]))
        except (KeyError, ValueError, TypeError) as exc:
            raise ConfigError(
                f"step rules are invalid ({exc!r}); write them as StepRules.to_dict() does: "
                '{"on": [{"rule": "on-step", "need": "must-run", "any_of": '
                '[{"role": "draft", "where": []}]}], "off": [...]}'
            ) from exc


def _clause_dict(clause: Clause) -> dict[str, object]:
    return {
        "rule": clause.rule.value,
        "need": clause.need.value,
        "any_of": [
            {"role": m.role.value, "where": [[t.fact.value, t.op.value, t.value] for t in m.where]}
            for m in clause.any_of
        ],
    }


def _clauses(items: object) -> tuple[Clause, ...]:
    if not isinstance(items, list):
        raise TypeError(f"expected a list of clauses, got {items!r}")
    return tuple(
        Clause(
            Rule(item["rule"]),
            Need(item["need"]),
            tuple(
                Match(
                    Role(m["role"]),
                    tuple(FactTest(Fact(f), Op(o), v) for f, o, v in m.get("where", [])),
                )
                for m in item["any_of"]
            ),
        )
        for item in items
    )


def _more_than_one(fact: Fact) -> FactTest:
    return FactTest(fact, Op.GT, 1)


ZERO_STEP_RULES = StepRules(
    on=(
        Clause(Rule.ON_STEP, Need.MUST_RUN, (Match(Role.DRAFT),)),
        Clause(Rule.ON_STEP, Need.MUST_RUN, (Match(Role.VERIFY),)),
        Clause(Rule.ON_STEP, Need.MUST_RUN, (Match(Role.DRAFT_EXTEND_DECODE),)),
    ),
    off=(
        Clause(
            Rule.OFF_STEP,
            Need.MUST_NOT_RUN,
            (
                Match(Role.DRAFT, (_more_than_one(Fact.NUM_STEPS),)),
                Match(Role.DRAFT_FORWARD, (_more_than_one(Fact.NUM_STEPS),)),
            ),
        ),
        Clause(
            Rule.OFF_STEP,
            Need.MUST_NOT_RUN,
            (Match(Role.VERIFY, (_more_than_one(Fact.DRAFT_WIDTH),)),),
        ),
        Clause(
            Rule.OFF_STEP,
            Need.MUST_RUN,
            (
                Match(Role.VERIFY, (FactTest(Fact.DRAFT_WIDTH, Op.EQ, 1),)),
                Match(
                    Role.TARGET_FORWARD,
                    (
                        FactTest(Fact.FORWARD_MODE, Op.EQ, "DECODE"),
                        FactTest(Fact.IS_VERIFY, Op.EQ, False),
                    ),
                ),
            ),
        ),
        Clause(Rule.DRAFT_STATE, Need.MUST_RUN, (Match(Role.DRAFT_EXTEND_DECODE),)),
    ),
)
"""EAGLE v2 in SGLang: ON drafts, verifies and extends the draft; OFF in upstream's zero-step
state (``--speculative-adaptive``, and the off state of hooks before the plain one) runs no
multi-step draft, a one-token verify or a plain decode, and still extends the draft so the first
step after re-enabling drafts from current state."""

PLAIN_OFF_STEP_RULES = StepRules(
    on=ZERO_STEP_RULES.on,
    off=(
        Clause(
            Rule.OFF_STEP,
            Need.MUST_NOT_RUN,
            (
                Match(Role.DRAFT),
                Match(Role.DRAFT_FORWARD),
                Match(Role.VERIFY),
                Match(Role.DRAFT_EXTEND_DECODE),
            ),
        ),
        Clause(
            Rule.OFF_STEP,
            Need.MUST_RUN,
            (
                Match(
                    Role.TARGET_FORWARD,
                    (
                        FactTest(Fact.FORWARD_MODE, Op.EQ, "DECODE"),
                        FactTest(Fact.IS_VERIFY, Op.EQ, False),
                    ),
                ),
            ),
        ),
    ),
)
"""The hook's off state: ON as above; OFF is the scheduler's plain decode path: no draft, verify
or draft extend at all, a plain DECODE forward of the target."""


def step_rules_for(off_state: OffState) -> StepRules:
    """The rules of steps whose "off" ran ``off_state``."""
    return PLAIN_OFF_STEP_RULES if off_state is OffState.PLAIN else ZERO_STEP_RULES
