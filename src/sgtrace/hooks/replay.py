"""Replay the speculation policy over recorded decisions, for ``sgtrace validate --policy``.

The validator (``sgtrace.tracer``) hands over each rank's decisions in time order; the replay
feeds the policy what the hook fed it (its step counter, the batch size, the mean accept length,
the state before, and the step period a measure policy timed) and returns what the policy
decides. Decisions are duck-typed: this module does not import the tracer (a sibling layer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from sgtrace.hooks.policy import Observation, PolicyConfig, replay


class RecordedDecision(Protocol):
    hook_step: int | None
    batch_size: int | None
    accept_length: float | None
    step_period_s: float | None

    @property
    def was_on(self) -> bool: ...


def policy_replay(config: PolicyConfig) -> Callable[[Sequence[RecordedDecision]], list[bool]]:
    """A replay function: recorded decisions -> the ``spec_on`` the policy would choose."""

    def run(decisions: Sequence[RecordedDecision]) -> list[bool]:
        observations = [
            Observation(
                step=d.hook_step if d.hook_step is not None else index,
                batch_size=d.batch_size or 0,
                accept_lengths=None if d.accept_length is None else (d.accept_length,),
                spec_on=d.was_on,
                step_period_s=d.step_period_s,
            )
            for index, d in enumerate(decisions)
        ]
        return [decision.spec_on for decision in replay(config, observations)]

    return run
