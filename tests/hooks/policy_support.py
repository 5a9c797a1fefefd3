"""Drive the speculation on/off policy as the hook does and compare its events as rows.

``drive`` runs a :class:`Policy` one step per batch size (the next observation carries the
decision's state and the accept lengths of the verify that ran); ``events`` keeps every decision
that is not a plain ``steady`` as a row (``step bs=N ON|off [*] reason``), and ``assert_rows``
compares whole row lists and prints both on failure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sgtrace.payload.policies import make_policy
from sgtrace.payload.policy import Decision, Observation, PolicyConfig, PolicyKind, Reason

BATCH_ONLY = PolicyConfig(
    preset="batch-size", kind=PolicyKind.THRESHOLD, acceptance_gate=False, min_dwell_steps=0
)
# Breakeven 1 + 0.1 * 3 = 1.3; small numbers so scenarios stay short.
GATED = PolicyConfig(
    kind=PolicyKind.THRESHOLD,
    min_dwell_steps=0,
    accept_ema_alpha=0.5,
    min_accept_samples=3,
    probe_interval_steps=10,
    probe_steps=2,
    probe_backoff=2,
    max_probe_interval_steps=40,
)


def drive(
    config: PolicyConfig,
    batch_sizes: Sequence[int],
    accept: Callable[[int], float] = lambda step: 1.0,
    start_on: bool = True,
) -> tuple[list[Observation], list[Decision]]:
    """Run the policy as the hook would, one step per batch size.

    The observation of step ``k`` says whether speculation is on (the decision of ``k - 1``)
    and carries the accept lengths of the verify that ran in step ``k - 1``:
    ``accept(k - 1)`` for every request of that batch.
    """
    policy = make_policy(config)
    spec_on, lengths = start_on, None
    observations: list[Observation] = []
    decisions: list[Decision] = []
    for step, batch_size in enumerate(batch_sizes):
        obs = Observation(step, batch_size, lengths, spec_on)
        decision = policy.decide(obs)
        observations.append(obs)
        decisions.append(decision)
        spec_on = decision.spec_on
        lengths = (accept(step),) * batch_size if spec_on and batch_size else None
    return observations, decisions


def row(decision: Decision) -> str:
    """``step bs=N ON|off [*] reason``; ``*`` marks a toggle."""
    state = "ON " if decision.spec_on else "off"
    mark = "*" if decision.changed else " "
    return f"{decision.step:3} bs={decision.batch_size:<3} {state} {mark} {decision.reason.value}"


def events(decisions: Sequence[Decision]) -> list[str]:
    """The rows of every decision that is not a plain ``steady``."""
    return [row(d) for d in decisions if d.reason is not Reason.STEADY]


def assert_rows(actual: list[str], expected: str) -> None:
    """Compare whole row lists (ignoring leading blanks); on failure print both."""
    wanted = [line.strip() for line in expected.strip().splitlines()]
    actual = [line.strip() for line in actual]
    assert actual == wanted, "expected:\n" + "\n".join(wanted) + "\nactual:\n" + "\n".join(actual)
