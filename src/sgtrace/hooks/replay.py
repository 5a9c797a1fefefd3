"""Replay the speculation policy over recorded decisions, for ``sgtrace validate --policy``.

The validator hands over each rank's decisions in time order, each a
:class:`~sgtrace.payload.record.DecisionRecord` as the hook wrote it; the replay feeds the
policy the observation each one records and returns what the policy decides.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sgtrace.payload.policies import replay
from sgtrace.payload.policy import PolicyConfig
from sgtrace.payload.record import DecisionRecord


def policy_replay(config: PolicyConfig) -> Callable[[Sequence[DecisionRecord]], list[bool]]:
    """A replay function: recorded decisions -> the ``spec_on`` the policy would choose."""

    def run(decisions: Sequence[DecisionRecord]) -> list[bool]:
        observations = [decision.observation() for decision in decisions]
        return [decision.spec_on for decision in replay(config, observations)]

    return run
