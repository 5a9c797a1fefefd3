"""The threshold policy (``kind = "threshold"``): the load rule with hysteresis, an acceptance gate, probes.

* Load: OFF once ``batch_size >= off_above``; ON once ``batch_size <= on_below`` has held for
  more than ``on_delay_steps`` steps in a row; inside the band the state stays. The delay keeps
  speculation off through the short dips of a loaded server, where a few speculative steps cost
  more than they win.
* Acceptance gate: while ON, a mean accept length below the breakeven after
  ``min_accept_samples`` verifies turns speculation OFF at any load (``low-acceptance``).
* Probes: after ``probe_interval_steps`` off for low acceptance, at low load, ON for
  ``probe_steps`` verifies to judge again; a failed probe multiplies the wait by ``probe_backoff``.
* Dwell: toggles at least ``min_dwell_steps`` apart, except OFF at ``off_above`` or more (a
  speculative step there costs more than a toggle) and the end of a failed probe (a probe of a
  bad draft is paid as briefly as the measurement allows). ON always waits.

>>> policy = ThresholdPolicy(PolicyConfig(on_below=8, off_above=16, min_dwell_steps=0))
>>> spec_on = False
>>> for step, batch_size in enumerate([4, 20, 12, 8]):
...     decision = policy.decide(Observation(step, batch_size, None, spec_on))
...     spec_on = decision.spec_on
...     print(step, batch_size, spec_on, decision.reason.value)
0 4 True startup
1 20 False high-load
2 12 False steady
3 8 True low-load
"""

from __future__ import annotations

from .policy import Decision, Observation, PolicyConfig, Reason
from .rules import (
    Mode,
    PolicyState,
    Proposal,
    StatefulPolicy,
    accepts_too_little,
    check_order,
    conclude,
    observe,
    startup,
)


class ThresholdPolicy(StatefulPolicy):
    """The threshold policy and its state (see the module docstring)."""

    def advance(self, state: PolicyState, obs: Observation) -> tuple[PolicyState, Decision]:
        """The next state and the decision for ``obs``. Pure."""
        check_order(state, obs)
        config = self.config
        observed = observe(config, state, obs)
        if state.last_step is None:
            proposal = startup(config, obs)
        elif obs.spec_on:
            proposal = _when_on(config, observed, obs)
        else:
            proposal = _when_off(config, observed, obs)
        if _dwell_holds(config, state, obs, proposal):
            proposal = Proposal(obs.spec_on, Reason.DWELL_HOLD, state.mode, state.failed_probes)
        return conclude(config, observed, obs, proposal, keeps_accept_mean=False)


def _dwell_holds(
    config: PolicyConfig, state: PolicyState, obs: Observation, proposal: Proposal
) -> bool:
    """A toggle is due within ``min_dwell_steps`` of the last one, and may not skip the wait."""
    if proposal.spec_on == obs.spec_on or state.last_toggle_step is None:
        return False
    probe_failed = state.mode is Mode.PROBING and proposal.reason is Reason.LOW_ACCEPTANCE
    off_at_high_load = not proposal.spec_on and obs.batch_size >= config.off_above
    if proposal.reason is Reason.STARTUP or probe_failed or off_at_high_load:
        return False
    return obs.step - state.last_toggle_step < config.min_dwell_steps


def _when_on(config: PolicyConfig, state: PolicyState, obs: Observation) -> Proposal:
    probing = state.mode is Mode.PROBING
    needed = config.probe_steps if probing else config.min_accept_samples
    measured = config.acceptance_gate and state.accept_samples >= needed
    if measured and accepts_too_little(config, state, obs.batch_size):
        failed = state.failed_probes
        if probing and config.probe_interval(failed) < config.max_probe_interval_steps:
            failed += 1
        elif not probing:
            failed = 0
        return Proposal(False, Reason.LOW_ACCEPTANCE, Mode.HELD_OFF, failed)
    if obs.batch_size >= config.off_above:
        mode = Mode.HELD_OFF if probing else Mode.NORMAL
        return Proposal(False, Reason.HIGH_LOAD, mode, state.failed_probes)
    if probing and measured:
        return Proposal(True, Reason.PROBE_PASSED, Mode.NORMAL, 0)
    return Proposal(True, Reason.STEADY, state.mode, state.failed_probes)


def _when_off(config: PolicyConfig, state: PolicyState, obs: Observation) -> Proposal:
    low_load = obs.batch_size <= config.on_below
    if state.mode is Mode.NORMAL:
        if low_load and state.low_steps > config.on_delay_steps:
            return Proposal(True, Reason.LOW_LOAD, Mode.NORMAL, state.failed_probes)
        return Proposal(False, Reason.STEADY, Mode.NORMAL, state.failed_probes)
    since = obs.step - (state.last_toggle_step if state.last_toggle_step is not None else 0)
    if low_load and since >= config.probe_interval(state.failed_probes):
        return Proposal(True, Reason.PROBE, Mode.PROBING, state.failed_probes)
    return Proposal(False, Reason.STEADY, Mode.HELD_OFF, state.failed_probes)
