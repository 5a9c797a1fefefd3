"""Cohorts (``sgtrace.payload.cohort``): requests of one length that arrive together decode in
step only without speculation. The calibrated policy switches off for a cohort where the
stalls speculation measured at that batch size outweigh what its steps gain, keeps off while
the cohort decodes, and leaves a load that comes in waves (no stalls) speculating."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from sgtrace.payload.calibrated import CalibratedPolicy, spacing
from sgtrace.payload.calibration import Calibration
from sgtrace.payload.cohort import Cohort, round_of
from sgtrace.payload.policies import make_policy, replay
from sgtrace.payload.policy import Observation, PolicyConfig, PolicyKind, Reason
from sgtrace.payload.record import DecisionRecord
from sgtrace.payload.rules import PolicyState
from sgtrace.payload.window import window_of_periods

CALIBRATED = PolicyConfig(kind=PolicyKind.CALIBRATED)
STALL_S = 0.006  # what a prefill batch adds to a result


def seconds(batch_size: int, spec_on: bool) -> float:
    """Live-like steps: with accept length 2.5 speculation's steps alone pay 14% at 32."""
    return 0.0060 + 0.00021 * batch_size if spec_on else 0.0052 + 0.00002 * batch_size


def state_with(stalled_share: float, buckets: tuple[int, ...] = (4, 32)) -> PolicyState:
    """Both states measured at ``buckets``, their results interrupted by a prefill at
    ``stalled_share`` (0.7: a closed loop out of step, the off state probed in it; 0.04:
    waves)."""
    windows = []
    for on in (False, True):
        for b in buckets:
            step = seconds(b, on)
            kinds = tuple(i < round(64 * stalled_share) for i in range(64))
            stalls = (step + STALL_S,) * max(2, sum(kinds))
            windows.append(
                window_of_periods(on, b, (step,) * 16, (b,) * 16, 0, stalls[-16:], kinds)
            )
    cal = Calibration(windows=tuple(windows), last_ran_on=True, run=20)
    return PolicyState(last_step=99, accept_mean=2.5, accept_samples=40, calibration=cal)


def cohort_arrival(size: int, tokens: int = 64, spec_on: bool = True) -> Observation:
    return Observation(100, size, None, spec_on, arriving=size, cohort=size, cohort_tokens=tokens)


def test_a_cohort_in_a_closed_loop_switches_off_and_stays_off_while_it_decodes() -> None:
    state = state_with(0.7)
    policy = CalibratedPolicy(CALIBRATED)
    # without the cohort the steps decide: speculation stays
    _, plain = policy.advance(state, replace(cohort_arrival(32), cohort=0, cohort_tokens=0))
    assert (plain.spec_on, plain.reason) == (True, Reason.STEADY)
    after, decision = policy.advance(state, cohort_arrival(32))
    assert (decision.spec_on, decision.changed, decision.reason) == (False, True, Reason.COHORT)
    assert after.calibration is not None and after.calibration.cohort_until == 100 + 64 + 3
    # the results of the cohort's round: the measured rule would switch on, the cohort keeps off
    for step in range(101, 167):
        obs = Observation(step, 32, None, False, step_period_s=seconds(32, False))
        after, decision = policy.advance(after, obs)
        assert (decision.spec_on, decision.reason) == (False, Reason.COHORT), step
    obs = Observation(167, 32, None, False, step_period_s=seconds(32, False))
    _, decision = policy.advance(after, obs)
    assert (decision.spec_on, decision.reason) == (True, Reason.MEASURED)


def test_a_cohort_of_waves_keeps_speculating() -> None:
    """Nothing arrives while a wave finishes: speculation measured few stalls at 32."""
    _, decision = CalibratedPolicy(CALIBRATED).advance(state_with(0.04), cohort_arrival(32))
    assert (decision.spec_on, decision.changed, decision.reason) == (True, False, Reason.STEADY)


def test_a_small_batch_keeps_speculating_whatever_its_stalls() -> None:
    """At 4 requests speculation's steps pay 50%: a cohort's stalls do not outweigh that."""
    _, decision = CalibratedPolicy(CALIBRATED).advance(state_with(0.7), cohort_arrival(4))
    assert (decision.spec_on, decision.reason) == (True, Reason.STEADY)


def test_without_a_fresh_measured_share_of_stalls_speculation_stays() -> None:
    """Speculation's window at 32 holds too few results to tell how often a prefill stalls
    it, or its latest is older than a probe's spacing: no cohort decision (the round runs
    speculating and measures it)."""
    state = state_with(0.7)
    assert state.calibration is not None
    cal = state.calibration
    short = tuple(
        replace(w, kinds=w.kinds[:8]) if w.spec_on and w.bucket == 32 else w for w in cal.windows
    )
    cohort = Cohort(32, 64)
    assert round_of(CALIBRATED, cal, 2.5, cohort, 32, since=0) is not None
    assert round_of(CALIBRATED, replace(cal, windows=short), 2.5, cohort, 32, since=0) is None
    assert round_of(CALIBRATED, cal, 2.5, cohort, 32, since=1) is None  # measured at step 0
    assert round_of(CALIBRATED, cal, None, cohort, 32, since=0) is None  # no accept length yet
    stale = replace(state, last_step=spacing(CALIBRATED, 0))
    _, decision = CalibratedPolicy(CALIBRATED).advance(
        stale, replace(cohort_arrival(32), step=spacing(CALIBRATED, 0) + 1)
    )
    assert (decision.spec_on, decision.reason) == (True, Reason.STEADY)


def test_the_round_adds_the_measured_stalls_to_speculation_and_one_to_the_off_state() -> None:
    state = state_with(0.7)
    assert state.calibration is not None
    found = round_of(CALIBRATED, state.calibration, 2.5, Cohort(32, 64), 32, since=0)
    assert found is not None
    stalls = round(64 * 0.7) / 64 * 64 / 2.5  # the measured share of the round's 25.6 steps
    assert found.spec == pytest.approx(64 / 2.5 * seconds(32, True) + stalls * STALL_S)
    assert found.plain == pytest.approx(64 * seconds(32, False) + STALL_S)


def test_a_held_off_draft_and_a_probe_are_left_alone() -> None:
    state = state_with(0.7)
    assert state.calibration is not None
    gated = replace(state, mode=state.mode.HELD_OFF)
    _, decision = CalibratedPolicy(CALIBRATED).advance(gated, cohort_arrival(32))
    assert (decision.changed, decision.reason) == (False, Reason.STEADY)


def test_a_cohort_decision_replays_from_the_records_the_hook_writes() -> None:
    """A server measuring both states at 32 (the policy explores), its results interrupted
    by prefills most steps, then a cohort: the records' observations replay every decision."""
    policy = make_policy(CALIBRATED)
    rng = random.Random(3)
    records, spec_on = [], True
    for step in range(400):
        if step == 300:
            obs = cohort_arrival(32, spec_on=spec_on)
            obs = replace(obs, step=step)
        else:
            stalled = rng.random() < 0.7
            period = seconds(32, spec_on) * rng.uniform(0.97, 1.03) + (STALL_S if stalled else 0)
            lengths = (
                tuple(rng.choice((1.0, 2.0, 3.0, 4.0)) for _ in range(32)) if spec_on else None
            )
            obs = Observation(
                step, 32, lengths, spec_on, *((None, period) if stalled else (period, None))
            )
        decision = policy.decide(obs)
        lengths = obs.accept_lengths
        records.append(
            DecisionRecord(
                obs.step, 0, obs.batch_size, decision.spec_on, decision.changed,
                decision.reason.value, sum(lengths) / len(lengths) if lengths else None,
                obs.step_period_s, obs.interrupted_period_s, arriving=obs.arriving,
                cohort=obs.cohort, cohort_tokens=obs.cohort_tokens,
            )
        )  # fmt: skip
        spec_on = decision.spec_on
    replayed = replay(CALIBRATED, [r.observation() for r in records])
    assert [(d.spec_on, d.reason.value) for d in replayed] == [
        (r.spec_on, r.reason) for r in records
    ]
    assert records[300].reason == Reason.COHORT.value and not records[300].spec_on


def test_a_cohort_arriving_while_off_stays_in_step_unless_speculation_wins() -> None:
    """Off already (a larger batch before), a cohort arrives: where speculation does not win
    at its batch size, it is held off for its round (a probe of speculation would put it out
    of step for good); where speculation wins, the results switch on as before."""
    state = state_with(0.04, buckets=(4, 32, 64))  # waves: the round alone would not say off
    policy = CalibratedPolicy(CALIBRATED)
    after, decision = policy.advance(state, cohort_arrival(64, spec_on=False))
    assert (decision.spec_on, decision.changed, decision.reason) == (False, False, Reason.COHORT)
    assert after.calibration is not None and after.calibration.cohort_until == 100 + 64 + 3
    kept, decision = policy.advance(state, cohort_arrival(4, spec_on=False))
    assert (decision.spec_on, decision.reason) == (False, Reason.STEADY)
    assert kept.calibration is not None and kept.calibration.cohort_until == 0
