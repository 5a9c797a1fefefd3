"""The calibrated policy (``kind = "calibrated"``, ``--preset calibrated``): predict both states' goodput at the current batch size
from what this server measured about itself, and run the better one.

Per request, speculation yields ``A`` tokens a step (``A``: the mean accept length, bonus token
included, a decaying mean of the verifies seen: :func:`~.goodput.accept_with`) in
``t_on(bs)`` seconds, the off state (a plain decode step) one token in ``t_off(bs)``; so on
pays at batch size ``bs`` when
``A / t_on(bs) > 1 / t_off(bs)``, the ``bs`` of both goodputs cancelling. ``t_on`` and
``t_off`` are the model of :mod:`.calibration`: trimmed means of the periods between decode
results the server timed itself, per batch-size bucket and state, interpolated across buckets;
where both states measured how often another batch (a prefill) interrupts their results, those
interrupted periods count at their share (a state that finishes more requests a step shares
their successors' prefill batches among more of them). No constant of a machine enters: where
the crossover lies follows from the two curves and ``A``.

* **Switch** when the other state's predicted goodput beats the current one's by the margin
  ``max(min_margin, margin_z * se)`` (``se``: the combined relative standard error of the two
  predicted step times), the current state has run at least :func:`dwell` results, and the
  batch is not in a dip: the other state must also win at the largest batch size of the last
  :func:`dwell` results (``Calibration.recent``), and, in the tail of a wave that ran off, what
  is left of it repays the switch's measured cost (:mod:`.tail`). A switch commits the server
  to a dwell in the new state (and its first results run in the old one: the overlap
  scheduler's lag), so a batch that shrank for less than a dwell (a wave's tail, requests
  finishing before new ones arrive) is not served by switching; a batch that grows is (its
  peak is the current size).
* **Explore**: where the other state has no measurement in the current bucket (or an old one),
  run it for a probe of ``min_samples`` counted periods; the probe ends with the better of the
  two (``measured``; by ``min_margin`` only: both were just measured, and the spacing of probes
  bounds how often a probe can switch). Probes are spaced so that at most ``probe_share`` of
  the results run in a probed state (:func:`spacing`), and a bucket's probe again with
  requests running waits longer by what its two switches cost, as this server measured its
  switches (:mod:`.switchcost`: live, two switches among a hundred requests cost a turn a
  third), but for a bucket's first probe where the two states' predicted goodputs are within
  the switching margin (:func:`~.probes.may_explore`; one a bucket at most), and a bucket's
  probe that lost waits ``probe_backoff`` times longer, up to ``max_probe_interval_steps``
  (lost where it started: a wave's tail shrinks the
  batch while a probe runs, and the state it ends with is the better at the batch size then,
  not at the one it measured). A bucket measured long ago, by two probes' worth at least,
  where the current state leads by ``k`` switching margins is probed again ``k`` spacings
  apart (its measurement must drift that far to change the decision; live, a probe of the
  off state at one request, 2.3 times slower there, cost a short wave's turn 24%). No probe
  where a measurement cannot change the decision (:func:`is_settled`: the current state wins
  even with its step time at the top of what the measured buckets allow and the other's at
  the bottom, :func:`~.calibration.bracket`; in the bucket above the largest measured one a
  step grows at least as steeply as below it, so a state that lost there is not probed just
  above), and none in a dip (the batch was in a larger bucket within a dwell): the probe
  budget goes to the buckets where the states are close and to the loads that last. While
  waves arrive on an idle server again and again (:func:`~.probes.waves_arrive`; a closed
  loop idles once, at its start), a probe due among running requests waits for the next
  wave's arrival, which runs it from its first step where it is due in the wave's bucket
  (**Waves** below): one switch with nothing running, not two with the whole wave (live, the
  fair draft's first probe of the off state among 16 running requests cost that wave's turn
  28%); buckets only the waves' tails pass are left to the wave model's predictions.
* **Arrivals** (``Observation.arriving``: the hook asks when the requests a loop iteration
  received grow the batch, or a cohort among them, into a larger bucket, before their
  prefill): where the off state is the better at the new batch size (by ``min_margin``: a
  switch before the batch's first step costs no step of the wrong state), switch off now, not
  two results later; never on (:mod:`.arrivals` says why). **Cohorts** (:mod:`.cohort`,
  requests of one length arriving together): where the off state wins, or speculation's
  measured stalls outweigh its steps' gain over the cohort's round, keep off, in step, while
  it decodes (``Calibration.cohort_until``). **Waves** (:mod:`.wave`, requests of known lengths
  making half the batch or more) on an idle server: where speculation serves the whole wave
  faster, its tail and ragged end included, by ``min_margin``, switch on and hold it on until
  the wave's longest request ends (where requests run, a closed loop replaces those that
  finish: no tail); where the off state does, off until its first request ends; where
  neither wins by the margin, the state its steps at the batch size prefer by the switching
  margin (else the state it finds), held as long. Where the other state is not
  measured in the wave's bucket and may win there (:func:`~.goodput.may_win`), or a probe
  of it is due (**Explore**), the wave starts in it, as a probe (idle, the switch costs no
  step; a probe into a running wave switches with every request running: simulated, load.py's
  level of 64 with the good draft switched so three times), whose verdict takes what is left
  of the wave. Where the wave's
  own state is not measured there (the other may be: simulated, a warm-up wave's cohort had
  switched off, and the wave then ran off, unmeasured, until its tail), it is measured where
  it runs, no switch, and the verdict is the same.
* **Acceptance gate**: when ``A`` is below the breakeven where speculation is cheapest (at one
  request: ``t_on(1) / t_off(1)`` as the model predicts them; until it can, the configured
  prior ``1 + draft_cost_ratio * num_steps``), speculation goes off at any load,
  concurrency 1 included, and comes back only for an acceptance probe, spaced as above with a
  backoff per failed probe (``failed_probes``); the probe opens the gate only if ``A`` clears
  the breakeven by the switching margin (hysteresis: a draft at the breakeven stays off). It
  runs where speculation costs about what it costs at the breakeven (one request, or a bucket
  measured within the margin of it: :func:`~.goodput.near_breakeven`), where the verdict
  decides and the probe is the cheapest, and requests arriving end it by the verifies it saw.
  Where requests arrive on an idle server in that bucket, the probe starts with them
  (:func:`~.probes.held_off`).

Defaults and their reasons (:class:`~.policy.PolicyConfig`):

* ``min_samples = 8``: the interquartile mean of 8 periods drops the 2 longest and 2 shortest
  (host hiccups, a stray prefill the hook could not see) and its standard error is about
  ``1.1 * sigma / sqrt(8)``, 0.4 sigma: a state is measured in 8 steps.
* ``window_results = 16``: the latest 16 periods per bucket and state: twice the samples of a
  probe, so that a fresh probe outweighs nothing older than one probe, and the estimate follows
  the contexts' growth instead of averaging over the whole run.
* ``probe_share = 1/32``: probes of a state that is worse by ``x`` cost at most ``x / 32`` of
  the goodput (a state 50% worse: 1.6%), less after each lost probe (backoff).
* ``min_margin = 0.02`` and ``margin_z = 2``: a switch needs the other state to win by two
  standard errors of the estimates (noise alone then switches about 2% of the comparisons), and
  by 2% at least, the order of what a switch itself costs (two straddling steps per switch
  amortised over the dwell), so a noise-free machine does not flap around its crossover.
* Dwell ``min_samples + LAG_RESULTS`` results: a state is held at least as long as it takes to
  measure it; :data:`LAG_RESULTS` is the overlap scheduler's two-result lag plus the straddling
  result.
* ``accept_ema_alpha = 1/8`` (here the decay of older accept lengths a verify,
  :func:`~.goodput.accept_with`), ``probe_backoff = 2``, ``max_probe_interval_steps = 8192``
  and the prior breakeven are shared with the threshold policy (see
  :class:`~.policy.PolicyConfig`).

The clock makes this policy a one-rank decision: at TP size > 1 the hook decides on the rank
that broadcasts the scheduler's requests and carries the decision to the others (:mod:`.carry`).
The trace records the deciding rank's periods, so a replay decides alike.

>>> from .policy import Observation, PolicyConfig
>>> policy = CalibratedPolicy(PolicyConfig())
>>> policy.decide(Observation(0, 1, None, True, None)).reason.value
'startup'
"""

from __future__ import annotations

from dataclasses import replace

from .arrivals import on_arrival
from .calibration import Calibration, Probe, bucket_of, fold
from .frozen import replaced
from .goodput import (
    accept_with,
    accepts_too_little,
    better_state,
    breakeven,
    is_settled,
)
from .policy import Decision, Observation, PolicyConfig, Reason
from .probes import (
    LAG_RESULTS,
    dwell,
    gate_verdict,
    held_off,
    is_measured,
    may_explore,
    spacing,
    start_probe,
)
from .rules import Mode, PolicyState, Proposal, StatefulPolicy, check_order, conclude, mean
from .switchcost import measure, record
from .tail import kept_in_tail
from .wave import verdict


class CalibratedPolicy(StatefulPolicy):
    """The calibrated policy and its state (see the module docstring)."""

    decides_arrivals = True

    def advance(self, state: PolicyState, obs: Observation) -> tuple[PolicyState, Decision]:
        """The next state and the decision for ``obs``. Pure."""
        check_order(state, obs)
        config = self.config
        if obs.arriving:  # a pending switch's next periods would hold the arrivals' prefill
            state = replace(state, switch_step=-1) if state.switch_step >= 0 else state
            proposal, state = on_arrival(config, state, obs)
            state, decision = conclude(config, state, obs, proposal, True)
            return record(state, obs, decision), decision
        before = state.calibration or Calibration()
        ran_on = bool(obs.accept_lengths)
        fit, pending, worst, least, interrupted = measure(config, state, obs, before, ran_on)
        cal = fold(
            before,
            obs.step,
            obs.batch_size,
            ran_on,
            obs.step_period_s,
            config.window_results,
            dwell(config),
            interrupted,
        )
        cal = _count_probe_sample(cal, obs.step, ran_on)
        accept, samples, spread, weight = accept_with(config, state, obs)
        wave_left, made, tail_made = state.wave_left, state.wave_made, state.tail_made
        if wave_left or state.tail_lengths:  # a probed wave's, or one whose tail is judged
            accepts = obs.accept_lengths  # each request's tokens: the verify's mean, or one
            tokens = mean(accepts) if accepts else 1.0
            if wave_left:
                made += tokens
            if state.tail_lengths:
                tail_made += tokens
        # the state with this result, its step included: a step that changes nothing else keeps
        # it as the next state (conclude). Built without PolicyState's __init__: replace costs a
        # tenth of a step more, the constructor a twentieth (frozen.py; tests check the fields)
        observed = replaced(
            state,
            last_step=obs.step,
            accept_mean=accept,
            accept_samples=samples,
            accept_var=spread,
            accept_weight=weight,
            wave_made=made,
            tail_made=tail_made,
            switch_step=pending,
            switch_worst=worst,
            switch_least=least,
            switch_fit=fit,
            calibration=cal,
        )
        if state.last_step is None:
            proposal = Proposal(obs.spec_on, Reason.STARTUP)
        else:
            proposal, observed = _propose(config, observed, obs)
        observed, decision = conclude(config, observed, obs, proposal, keeps_accept_mean=True)
        return record(observed, obs, decision), decision


def _count_probe_sample(cal: Calibration, step: int, ran_on: bool) -> Calibration:
    """Count this result's period toward the probe when it was kept for the probed state."""
    probe = cal.probe
    if probe is None or probe.spec_on != ran_on:
        return cal
    if not any(w.spec_on == ran_on and w.last_step == step for w in cal.windows):
        return cal
    return replace(cal, probe=replace(probe, samples=probe.samples + 1))


def _propose(
    config: PolicyConfig, state: PolicyState, obs: Observation
) -> tuple[Proposal, PolicyState]:
    cal = state.calibration or Calibration()
    failed = state.failed_probes
    if cal.probe is not None:
        return _during_probe(config, state, obs, cal.probe)
    if state.mode is Mode.HELD_OFF:
        return held_off(config, state, obs)
    if obs.spec_on and accepts_too_little(config, state):
        gate = replace(cal, gate_free_at=obs.step + spacing(config, failed))
        off = Proposal(False, Reason.LOW_ACCEPTANCE, Mode.HELD_OFF, failed)
        return off, replace(state, calibration=gate)
    if obs.batch_size < 1:
        return Proposal(obs.spec_on, Reason.STEADY), state
    if obs.spec_on == cal.cohort_on and obs.step < cal.cohort_until:  # held (_on_arrival)
        return Proposal(obs.spec_on, Reason.COHORT, Mode.NORMAL, failed), state
    if may_explore(config, state, obs):
        probe = Probe(not obs.spec_on, obs.step, batch_size=obs.batch_size)
        return start_probe(
            state, Proposal(not obs.spec_on, Reason.EXPLORE, Mode.PROBING, failed), probe
        )
    better = better_state(config, state, obs.batch_size, obs.spec_on)
    if better is None or better == obs.spec_on:
        return Proposal(obs.spec_on, Reason.STEADY, Mode.NORMAL, failed), state
    peak = max(cal.recent, default=obs.batch_size)  # a dip: hold what the peak needs
    if peak > obs.batch_size and better_state(config, state, peak, obs.spec_on) != better:
        return Proposal(obs.spec_on, Reason.DWELL_HOLD, Mode.NORMAL, failed), state
    since = obs.step - (state.last_toggle_step if state.last_toggle_step is not None else -1)
    if since < dwell(config):
        return Proposal(obs.spec_on, Reason.DWELL_HOLD, Mode.NORMAL, failed), state
    kept = kept_in_tail(config, state, obs.batch_size, obs.step, better)
    if kept is not None:
        return Proposal(obs.spec_on, Reason.TAIL, Mode.NORMAL, failed), kept
    return Proposal(better, Reason.MEASURED, Mode.NORMAL, failed), state


def _during_probe(
    config: PolicyConfig, state: PolicyState, obs: Observation, probe: Probe
) -> tuple[Proposal, PolicyState]:
    """Hold the probed state until it has ``min_samples`` counted periods (or four probes'
    worth of results passed: prefills kept the periods out), then take the better state."""
    cal = state.calibration or Calibration()
    failed = state.failed_probes
    done = probe.samples >= config.min_samples or obs.step - probe.started >= 4 * dwell(config)
    if not done:
        return Proposal(probe.spec_on, Reason.STEADY, Mode.PROBING, failed), state
    if probe.in_place:  # a wave's own state measured: what is left of the wave decides
        held, state = verdict(config, _with(state, replace(cal, probe=None)), obs.batch_size,
                              probe.spec_on, obs.step, LAG_RESULTS)  # fmt: skip
        return held or Proposal(probe.spec_on, Reason.MEASURED, Mode.NORMAL, failed), state
    if probe.is_gate:
        return gate_verdict(config, state, obs.step)
    ended = replace(cal, probe=None, probe_free_at=obs.step + spacing(config, 0))
    came_from = not probe.spec_on
    # both states were just measured: the better estimate wins (min_margin only); how often a
    # probe can switch is bounded by the probes' spacing, not by the statistical margin
    # the state to run now is the better at the batch size now; whether the probe lost, the
    # better at the batch size it measured (a wave's tail shrinks the batch during a probe)
    probed = probe.batch_size or obs.batch_size
    better = better_state(config, _with(state, ended), obs.batch_size, came_from, at_probe=True)
    if not is_measured(config, state, came_from, obs.batch_size):  # a wave's probe on arrival
        better = better_state(config, _with(state, ended), obs.batch_size, probe.spec_on)
    there = (
        better
        if probed == obs.batch_size
        else better_state(config, _with(state, ended), probed, came_from, at_probe=True)
    )
    lost = there is None or there == came_from
    ended = ended.with_failures(probed, ended.failures_at(probed) + 1 if lost else 0)
    state = _with(state, ended)
    if state.wave_left:  # a wave's probe: what is left of the wave decides, a tie stays
        held, state = verdict(config, state, obs.batch_size, probe.spec_on, obs.step, LAG_RESULTS)
        if held is not None:
            return held, state
    stay = better is None or better == came_from
    return Proposal(
        came_from if stay else probe.spec_on, Reason.MEASURED, Mode.NORMAL, failed
    ), state


def _with(state: PolicyState, cal: Calibration) -> PolicyState:
    return replace(state, calibration=cal)


__all__ = [
    "CalibratedPolicy",
    "accepts_too_little",
    "better_state",
    "breakeven",
    "bucket_of",
    "dwell",
    "is_settled",
    "spacing",
]
