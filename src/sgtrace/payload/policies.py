"""The policy a configuration asks for, and replay over recorded observations.

>>> policy = policy_from_dict({"preset": "batch-size", "min_dwell_steps": 0})
>>> policy.decide(Observation(step=0, batch_size=40, accept_lengths=None, spec_on=True))
Decision(spec_on=False, changed=True, reason=<Reason.STARTUP: 'startup'>, step=0, batch_size=40, num_steps=0, accept_mean=None)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .calibrated import CalibratedPolicy
from .forced import ForcedTogglePolicy
from .measured import MeasuredPolicy
from .policy import Decision, Observation, Policy, PolicyConfig, PolicyKind
from .rules import PolicyState, StatefulPolicy
from .threshold import ThresholdPolicy

POLICIES: dict[PolicyKind, type[StatefulPolicy]] = {
    PolicyKind.CALIBRATED: CalibratedPolicy,
    PolicyKind.THRESHOLD: ThresholdPolicy,
    PolicyKind.MEASURED: MeasuredPolicy,
    PolicyKind.FORCED: ForcedTogglePolicy,
}


def make_policy(config: PolicyConfig, state: PolicyState | None = None) -> StatefulPolicy:
    """A fresh policy of ``config.chosen``, from ``state`` if given."""
    return POLICIES[config.chosen](config, state)


def policy_from_dict(data: Mapping[str, object]) -> StatefulPolicy:
    """A fresh policy from JSON-decoded config values (as written by ``PolicyConfig.to_json``)."""
    return make_policy(PolicyConfig.from_dict(data))


def replay(config: PolicyConfig, observations: Iterable[Observation]) -> list[Decision]:
    """The decisions a fresh policy makes over ``observations`` (a recorded trace)."""
    policy: Policy = make_policy(config)
    return [policy.decide(obs) for obs in observations]
