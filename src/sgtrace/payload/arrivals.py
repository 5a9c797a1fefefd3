"""Requests arriving: what the calibrated policy (:mod:`.calibrated`) decides before their
prefill, where the batch grows into a larger bucket or a cohort or a wave arrives
(``Observation.arriving``; the module docstring of :mod:`.calibrated`, "Arrivals", "Cohorts",
"Waves")."""

from __future__ import annotations

from dataclasses import replace

from .calibration import Probe, bucket_of
from .cohort import MIN_COHORT, Cohort, round_of
from .goodput import better_state, may_win
from .policy import Observation, PolicyConfig, Reason
from .probes import (
    LAG_RESULTS,
    gate_verdict,
    held_off,
    is_measured,
    may_explore,
    spacing,
    start_probe,
)
from .rules import Mode, PolicyState, Proposal
from .wave import hold_wave


def on_arrival(
    config: PolicyConfig, state: PolicyState, obs: Observation
) -> tuple[Proposal, PolicyState]:
    """Requests arrived and make a batch of ``obs.batch_size``: switch speculation off now,
    before its first decode step, where the off state is the better there by ``min_margin``
    (no step runs in the wrong state); and keep a cohort (:mod:`.cohort`) off, in step, while
    it decodes where the off state is the better or the cohort's round runs faster in step;
    else hold a wave (:mod:`.wave`) that finds nothing running on where speculation serves all
    of it faster, or probe the other state from the wave's first step where it is unmeasured
    there and may win or a probe of it is due (:func:`~.probes.may_explore`), or measure the
    wave's own state where it runs where that one is unmeasured there (the wave's verdict then
    waits for both). A due acceptance probe of a held-off draft starts on requests arriving
    on an idle server (:func:`~.probes.held_off`: the switch on costs no step; the steps'
    rules leave it to such arrivals in their bucket). An acceptance probe ends now,
    by the verifies it saw (:func:`~.probes.gate_verdict`: it started among a few requests,
    and ended later it would retract all the arrivals; live, a probe at 2 requests ran into a
    wave of 128 and switched off among them, a turn 13% behind); passed, the arrivals are
    decided as here. Another probe or a held-off draft is left alone. On only for such a
    probe or wave: else switching on early spares a step or two of the off state, and a burst
    received over several loop iterations grows through batch sizes where speculation wins
    (live, a burst of 64 was asked at 11 and at 57 requests, one iteration apart, and flipped
    twice)."""
    idle = obs.arriving >= obs.batch_size  # and a switch costs no step
    state = _arrived(state, obs, idle)
    cal = state.calibration
    steady = Proposal(obs.spec_on, Reason.STEADY, state.mode, state.failed_probes)
    if cal is not None and cal.probe is not None and cal.probe.is_gate and state.accept_samples:
        steady, state = gate_verdict(config, state, obs.step)
        if not steady.spec_on:
            return steady, state
        state = replace(state, mode=Mode.NORMAL, failed_probes=steady.failed_probes)
        cal = state.calibration
    if cal is not None and cal.probe is None and state.mode is Mode.HELD_OFF and idle:
        gate, gated = held_off(config, state, obs, arriving=True)
        if gate.spec_on:  # a due acceptance probe starts with them (held_off: never if on)
            return gate, gated
    if cal is None or cal.probe is not None or state.mode is not Mode.NORMAL:
        return steady, state
    # off wins from the current state (off already: speculation does not win by the margin)
    off_wins = better_state(config, state, obs.batch_size, obs.spec_on, at_probe=True) is False
    cohort, since = Cohort(obs.cohort, obs.cohort_tokens), obs.step - spacing(config, 0)
    found = round_of(config, cal, state.accept_mean, cohort, obs.batch_size, since)
    pays = found is not None and found.spec > found.plain * (1.0 + config.min_margin)
    if cohort.size >= MIN_COHORT and (pays or off_wins):  # in step: no probe breaks it
        until = obs.step + obs.cohort_tokens + LAG_RESULTS
        held = replace(state, calibration=replace(cal, cohort_until=until, cohort_on=False))
        return Proposal(False, Reason.COHORT, Mode.NORMAL, state.failed_probes), held
    # a wave on an idle server (in a running closed loop the batch does not drain as modelled)
    lengths = obs.wave_lengths
    wave = (lengths, obs.batch_size)
    # a tie goes to the state the steps at this batch size prefer (by the switching margin):
    # idle, a switch costs nothing, and the state found may be a previous cohort's
    stepwise = better_state(config, state, obs.batch_size, obs.spec_on)
    tie = obs.spec_on if stepwise is None else stepwise
    waved = hold_wave(config, state, wave, tie, obs.step, LAG_RESULTS) if idle else None
    if waved is not None:  # the state that wins by the margin, else the tie's, held
        return waved
    unmeasured = not is_measured(config, state, not obs.spec_on, obs.batch_size)
    may = unmeasured and may_win(config, state, obs.batch_size, obs.spec_on)
    if idle and lengths and (may or may_explore(config, state, obs, arriving=True)):
        # the other state unmeasured where it may win the wave, or due a probe (the steps'
        # rules wait for a wave's arrival to probe): probed from the wave's first step, and
        # what is left of the wave then decides (the probe's verdict, :mod:`.calibrated`)
        probe = Probe(not obs.spec_on, obs.step, batch_size=obs.batch_size)
        explore = Proposal(not obs.spec_on, Reason.EXPLORE, Mode.PROBING, state.failed_probes)
        return start_probe(replace(state, wave_left=lengths, wave_made=0.0), explore, probe)
    if idle and lengths and not is_measured(config, state, obs.spec_on, obs.batch_size):
        # the wave's own state unmeasured in its bucket (the wave model decides nothing): it
        # is measured where it runs, and what is left of the wave then decides
        probe = Probe(obs.spec_on, obs.step, batch_size=obs.batch_size, in_place=True)
        measure_it = Proposal(obs.spec_on, Reason.EXPLORE, Mode.PROBING, state.failed_probes)
        return start_probe(replace(state, wave_left=lengths, wave_made=0.0), measure_it, probe)
    if obs.spec_on and off_wins:
        return Proposal(False, Reason.ARRIVAL, Mode.NORMAL, state.failed_probes), state
    return steady, state


def _arrived(state: PolicyState, obs: Observation, idle: bool) -> PolicyState:
    """``state`` with the arrival told: on an idle server, its step, the gap since the one
    before and its bucket (probes due among running requests may wait for the next such,
    :func:`~.probes.waves_arrive`) and the wave's lengths (:mod:`.tail`); requests joining
    running ones end the tail those lengths told (the batch no longer drains as modelled)."""
    if idle:
        gap = obs.step - state.wave_at if state.wave_at >= 0 else -1
        bucket = bucket_of(obs.batch_size)
        return replace(
            state, wave_at=obs.step, wave_gap=gap, wave_bucket=bucket,
            tail_lengths=obs.wave_lengths, tail_held=0,
            tail_made=1.0 if obs.wave_lengths else 0.0,  # the prefill's token
        )  # fmt: skip
    return (
        replace(state, tail_lengths=(), tail_held=0, tail_made=0.0) if state.tail_lengths else state
    )


__all__ = ["on_arrival"]
