"""When the calibrated policy (:mod:`.calibrated`) holds a state and when it probes the other:
the dwell, the spacing of probes, a probe's start and whether a state is measured in a bucket.

>>> from .policy import PolicyConfig
>>> dwell(PolicyConfig()), spacing(PolicyConfig(), 0), spacing(PolicyConfig(), 2)
(11, 341, 1364)
"""

from __future__ import annotations

import math
from dataclasses import replace

from .calibration import Calibration, Probe, bucket_of
from .goodput import accepts_too_little, goodputs, is_settled, near_breakeven
from .policy import Observation, PolicyConfig, Reason
from .rules import Mode, PolicyState, Proposal
from .switchcost import probe_spacing

LAG_RESULTS = 3  # a decision on result N runs from result N + 2; N + 2 straddles the switch


def dwell(config: PolicyConfig) -> int:
    """Results a state runs before a measured switch: as many as measuring it takes."""
    return config.min_samples + LAG_RESULTS


def spacing(config: PolicyConfig, failures: int) -> int:
    """Steps from one probe to the next after ``failures`` lost probes in a row.

    A probe runs about :func:`dwell` results; spacing them ``dwell * (1 / probe_share - 1)``
    apart keeps the share of probed results at ``probe_share``.
    """
    base = math.ceil(dwell(config) * (1.0 / config.probe_share - 1.0))
    return int(min(config.max_probe_interval_steps, base * config.probe_backoff**failures))


def start_probe(
    state: PolicyState, proposal: Proposal, probe: Probe
) -> tuple[Proposal, PolicyState]:
    """``proposal`` and ``state`` with ``probe`` running."""
    cal = state.calibration or Calibration()
    return proposal, replace(state, calibration=replace(cal, probe=probe))


def is_measured(config: PolicyConfig, state: PolicyState, spec_on: bool, batch_size: int) -> bool:
    """Whether ``spec_on``'s state holds ``min_samples`` periods in ``batch_size``'s bucket."""
    window = (state.calibration or Calibration()).window_of(spec_on, batch_size)
    return window is not None and window.count >= config.min_samples


def gate_verdict(
    config: PolicyConfig, state: PolicyState, step: int
) -> tuple[Proposal, PolicyState]:
    """An acceptance probe's end at ``step``: the gate opens where the accept length of the
    verifies it saw clears the breakeven by the switching margin; else the draft is held off
    again, the next probe a spacing later, the spacing doubled by each failure in a row."""
    cal = state.calibration or Calibration()
    ended = replace(cal, probe=None, probe_free_at=step + spacing(config, 0))
    if state.accept_samples >= 1 and not accepts_too_little(config, state, 1, margin=True):
        return Proposal(True, Reason.PROBE_PASSED, Mode.NORMAL, 0), replace(
            state, calibration=ended
        )
    failed = state.failed_probes
    failed = failed + 1 if spacing(config, failed) < config.max_probe_interval_steps else failed
    ended = replace(ended, gate_free_at=step + spacing(config, failed))
    off = Proposal(False, Reason.LOW_ACCEPTANCE, Mode.HELD_OFF, failed)
    return off, replace(state, calibration=ended)


def waves_arrive(
    config: PolicyConfig, state: PolicyState, obs: Observation, in_bucket: bool = False
) -> bool:
    """Whether requests arrive on an idle server again and again: the latest two such
    arrivals a :func:`spacing` apart at most and the latest within one of ``obs`` (and,
    ``in_bucket``, in its bucket). Then a probe due among running requests waits for the next
    such arrival and runs from its first step, one switch with nothing running instead of two
    with every request running. A closed loop idles once, at its start: its probes run where
    its requests run (simulated, waiting after that one arrival cost the closed loops of 128
    clients 13-26%)."""
    limit = spacing(config, 0)
    recent = 0 <= state.wave_gap <= limit and obs.step - state.wave_at <= limit
    return recent and (not in_bucket or state.wave_bucket == bucket_of(obs.batch_size))


def held_off(
    config: PolicyConfig, state: PolicyState, obs: Observation, arriving: bool = False
) -> tuple[Proposal, PolicyState]:
    """A draft held off for accepting too little is probed again once the gate's spacing and
    its two switches' steps passed, at a batch size where speculation costs about what it
    costs at the breakeven (:func:`~.goodput.near_breakeven`: a small batch, where the
    gate's verdict decides and the probe is the cheapest); with requests running (not
    ``arriving``), not while requests arrive on an idle server in this bucket
    (:func:`waves_arrive`: live, the poor draft's probes at one request, two switches of about
    5 plain steps each, cost the level 1.1-1.3%); a bucket only waves' tails reach (requests
    arriving in larger ones) is probed where they run, else a draft held off under waves of 16
    would never be probed again."""
    cal = state.calibration or Calibration()
    failed = state.failed_probes
    held = Proposal(False, Reason.STEADY, Mode.HELD_OFF, failed)
    if obs.spec_on or obs.batch_size < 1 or obs.step < cal.gate_free_at:
        return held, state
    if not arriving and waves_arrive(config, state, obs, in_bucket=True):
        return held, state
    if obs.step < cal.gate_free_at + probe_spacing(config, state, cal, obs.batch_size, False):
        return held, state
    if not near_breakeven(config, cal, obs.batch_size):
        return held, state
    probe = Probe(True, obs.step, is_gate=True)
    fresh = replace(state, accept_mean=None, accept_samples=0, accept_var=None)  # anew
    return start_probe(fresh, Proposal(True, Reason.PROBE, Mode.PROBING, failed), probe)


def may_explore(
    config: PolicyConfig, state: PolicyState, obs: Observation, arriving: bool = False
) -> bool:
    """The current state is measured in this bucket, the other not (and its bracket leaves it
    a chance: not :func:`~.goodput.is_settled`) or long ago, and the probe budget allows a
    probe now. With requests running (not ``arriving``), not while waves arrive on an idle
    server (:func:`waves_arrive`): the next wave's arrival probes its bucket,
    one switch with nothing running instead of two with the whole wave (live, a first probe of
    the off state among 16 requests, its two switches and 10 steps, cost a wave's turn 28%);
    the buckets only the waves' tails pass are left to the wave model's predictions
    (simulated, the tails' probes cost the spread levels of 4-16 requests 0.5-1.5%)."""
    cal = state.calibration or Calibration()
    other = cal.window_of(not obs.spec_on, obs.batch_size)
    early = obs.step < cal.probe_free_at
    if early and other is not None:
        return False
    if not arriving and waves_arrive(config, state, obs):
        return False
    if bucket_of(max(cal.recent, default=obs.batch_size)) != bucket_of(obs.batch_size):
        return False  # a dip: the batch was in a larger bucket within a dwell
    if not is_measured(config, state, obs.spec_on, obs.batch_size):
        return False
    if early and not _close(config, state, obs):  # a bucket's first probe, spaced but if close
        return False
    if other is None or other.count < config.min_samples:
        return not is_settled(config, state, obs.batch_size, obs.spec_on)
    base = spacing(config, cal.failures_at(obs.batch_size))
    waited = obs.step - other.last_step - base
    if waited < 0:
        return False
    # where the current state wins by far, as many spacings as its lead holds switching
    # margins (a measurement long ago must drift that far to change the decision), once the
    # other state was measured by two probes' worth (one probe's reading may be biased: a
    # closed loop's interruptions not yet in it); and the two switches' steps (both predicted
    # only once the spacing has passed)
    found = (
        goodputs(config, state, obs.batch_size) if other.count >= 2 * config.min_samples else None
    )
    if found is not None:
        mine, theirs = found[:2] if obs.spec_on else (found[1], found[0])
        lead = max(0.0, mine / theirs - 1.0) / found[2]
        far = min(config.max_probe_interval_steps, math.ceil(base * max(1.0, lead)))
        waited = obs.step - other.last_step - far
    return waited >= 0 and waited >= probe_spacing(config, state, cal, obs.batch_size, obs.spec_on)


def _close(config: PolicyConfig, state: PolicyState, obs: Observation) -> bool:
    """Whether the two states' predicted goodputs at the batch size are within the switching
    margin: there a bucket's first probe is not spaced (at most one a bucket; spacing it after
    a probe elsewhere, a short level near the crossover ran its whole length unprobed)."""
    found = goodputs(config, state, obs.batch_size)
    return found is not None and abs(found[0] - found[1]) <= max(found[:2]) * found[2]


__all__ = [
    "LAG_RESULTS",
    "dwell",
    "gate_verdict",
    "held_off",
    "is_measured",
    "may_explore",
    "spacing",
    "start_probe",
    "waves_arrive",
]
