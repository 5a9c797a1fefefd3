"""Forced toggles for correctness tests: speculation flips every ``toggle_every_steps`` decode
results, whatever the load (``toggle_every_steps = k`` in the policy config; 0, the default,
means a real policy decides).

A switch must keep every request's output token-identical to a server without speculation,
leak no KV slot and lose no request, however often it happens; this policy makes it happen as
often as asked, at steps a replay reproduces (the decision depends on the step counter only).

>>> from .policy import Observation, PolicyConfig
>>> policy = ForcedTogglePolicy(PolicyConfig(toggle_every_steps=2))
>>> [policy.decide(Observation(i, 4, None, True)).spec_on for i in range(5)]
[True, False, False, True, True]
"""

from __future__ import annotations

from .policy import Decision, Observation, Reason
from .rules import PolicyState, StatefulPolicy


class ForcedTogglePolicy(StatefulPolicy):
    """ON for ``k`` results, OFF for ``k``, and so on (``k = toggle_every_steps``)."""

    def advance(self, state: PolicyState, obs: Observation) -> tuple[PolicyState, Decision]:
        k = max(1, self.config.toggle_every_steps)
        spec_on = (obs.step + 1) // k % 2 == 0
        decision = Decision(
            spec_on=spec_on,
            changed=spec_on != obs.spec_on,
            reason=Reason.FORCED,
            step=obs.step,
            batch_size=obs.batch_size,
            num_steps=self.config.steps_for(obs.batch_size) if spec_on else 0,
            accept_mean=state.accept_mean,
        )
        return state, decision
