"""Decisions on requests arriving: the calibrated policy switches before a grown batch's first
decode step where what it measured says the other state is the better there; nothing else
moves. And the bound above the measured batch sizes that keeps it from probing a state the
measurements already rule out."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sgtrace.payload.calibrated import CalibratedPolicy, is_settled
from sgtrace.payload.calibration import Calibration, Probe, bracket, predict
from sgtrace.payload.policies import make_policy
from sgtrace.payload.policy import Observation, PolicyConfig, PolicyKind, Reason
from sgtrace.payload.record import DecisionRecord
from sgtrace.payload.rules import Mode, PolicyState
from sgtrace.payload.window import window_of_periods

CALIBRATED = PolicyConfig(kind=PolicyKind.CALIBRATED)


def seconds(batch_size: int, spec_on: bool) -> float:
    """A toy machine: with accept length 2.5 speculation pays below 37 requests."""
    return 0.006 + 0.0003 * batch_size if spec_on else 0.005 + 0.00005 * batch_size


def measured(buckets: tuple[int, ...], accept: float = 2.5) -> PolicyState:
    """A policy state that measured both states at ``buckets``, 8 periods each."""
    windows = tuple(
        window_of_periods(on, b, (seconds(b, on),) * 8, (b,) * 8, 0)
        for on in (False, True)
        for b in buckets
    )
    cal = Calibration(windows=windows, last_ran_on=True, run=20)
    return PolicyState(last_step=99, accept_mean=accept, accept_samples=40, calibration=cal)


def arrival(size: int, spec_on: bool = True, step: int = 100) -> Observation:
    return Observation(step, size, None, spec_on, arriving=size)


def test_requests_arriving_where_the_other_state_wins_switch_before_their_first_step() -> None:
    state = measured((4, 64))
    after, decision = CalibratedPolicy(CALIBRATED).advance(state, arrival(64))
    assert (decision.spec_on, decision.changed, decision.reason) == (False, True, Reason.ARRIVAL)
    assert after.last_toggle_step == 100  # a dwell starts: no switch back on the next result
    assert after.calibration == state.calibration  # an arrival measures nothing
    # where the running state is the better, it stays, and only the step moves on
    kept, decision = CalibratedPolicy(CALIBRATED).advance(state, arrival(4))
    assert (decision.spec_on, decision.changed, decision.reason) == (True, False, Reason.STEADY)
    assert kept == replace(
        state, last_step=100, wave_at=100, wave_bucket=4
    )  # arrived on an idle server


@pytest.mark.parametrize(
    "state",
    [
        replace(
            measured((4, 64)),
            calibration=replace(measured((4, 64)).calibration, probe=Probe(True, 90)),
        ),
        replace(measured((4, 64)), mode=Mode.HELD_OFF),
        PolicyState(last_step=99, accept_mean=2.5, accept_samples=40),  # nothing measured
    ],
    ids=["during-a-probe", "draft-held-off", "nothing-measured"],
)
def test_an_arrival_leaves_a_probe_a_held_off_draft_and_an_unknown_alone(
    state: PolicyState,
) -> None:
    _, decision = CalibratedPolicy(CALIBRATED).advance(state, arrival(64))
    assert (decision.changed, decision.reason) == (False, Reason.STEADY)


def test_an_arrival_never_switches_speculation_on() -> None:
    """Off at a batch where speculation wins, an arrival keeps off: a burst received over
    several iterations passes through small batch sizes first; the results decide on."""
    state = measured((4, 64))
    _, decision = CalibratedPolicy(CALIBRATED).advance(state, arrival(4, spec_on=False))
    assert (decision.spec_on, decision.changed) == (False, False)


def test_a_policy_that_does_not_decide_on_arrivals_keeps_its_state() -> None:
    policy = make_policy(PolicyConfig(kind=PolicyKind.THRESHOLD))
    policy.decide(Observation(0, 4, (2.5,) * 4, True))
    before = policy.state
    decision = policy.decide(arrival(64, step=1))  # the load rule would switch off at 64
    assert (decision.changed, decision.spec_on, policy.state) == (False, True, before)


def test_arrival_decisions_replay_from_their_records() -> None:
    policy = CalibratedPolicy(CALIBRATED, measured((4, 64)))
    observations = [arrival(64), Observation(100, 64, (2.5,) * 64, True, 0.03)]
    records = []
    for obs in observations:
        d = policy.decide(obs)
        accept = None if obs.accept_lengths is None else 2.5
        records.append(
            DecisionRecord(
                obs.step,
                0,
                obs.batch_size,
                d.spec_on,
                d.changed,
                d.reason.value,
                accept,
                obs.step_period_s,
                arriving=obs.arriving,
            )  # fmt: skip
        )
    assert records[0].observation() == observations[0]
    again = CalibratedPolicy(CALIBRATED, measured((4, 64)))  # as sgtrace validate replays
    assert [
        (d.spec_on, d.reason.value) for d in map(again.decide, (r.observation() for r in records))
    ] == [(r.spec_on, r.reason) for r in records]


@pytest.mark.parametrize(
    "bad",
    [
        {"arriving": -1},
        {"arriving": 3, "step_period_s": 0.01},
        {"arriving": 3, "accept_lengths": (2.0,)},
    ],
)
def test_an_arrival_is_no_decode_result(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Observation(**{"step": 1, "batch_size": 8, "accept_lengths": None, "spec_on": True, **bad})  # type: ignore[arg-type]


def test_above_the_measured_buckets_a_step_grows_at_least_as_steeply_as_below() -> None:
    state = measured((8, 16))
    cal = state.calibration
    assert cal is not None
    found = bracket(cal, True, 32, min_samples=8)
    at_8, at_16 = seconds(8, True), seconds(16, True)
    slope = (at_16 - at_8) / 8
    assert found is not None and found.high == pytest.approx(at_16 * 32 / 16)
    assert found.low == pytest.approx(at_16 + slope * (32 - 16))  # not just at_16
    # farther than the next bucket the two buckets' slope bounds nothing (a bend between them,
    # their noise, whatever else differed between their measurements): only monotonicity
    far = bracket(cal, True, 128, min_samples=8)
    assert far is not None and far.low == pytest.approx(at_16)
    assert far.high == pytest.approx(at_16 * 128 / 16)
    # a single bucket gives no slope: only monotonicity bounds it
    single = bracket(measured((16,)).calibration, True, 128, min_samples=8)  # type: ignore[arg-type]
    assert single is not None and single.low == pytest.approx(at_16)


def test_a_bend_between_small_buckets_leaves_a_state_worth_probing_far_above() -> None:
    """The plain step measured at 1 and 2 requests only, with a bend between them (4.78 and
    4.96 ms: 0.18 ms a request, where the curve rises 0.03 ms a request to 64), and speculation
    measured at 64: extended, that bend would put the plain step of 64 at 16 ms at least and
    settle speculation there for good (the simulated waves ran EAGLE-3 at 0.7 of the off
    state's goodput at 128). Farther than the next bucket only monotonicity bounds it, so the
    off state is worth a probe; next to its largest bucket the bend still bounds it."""
    windows = (
        window_of_periods(False, 1, (0.00478,) * 8, (1,) * 8, 0),
        window_of_periods(False, 2, (0.00496,) * 8, (2,) * 8, 0),
        window_of_periods(True, 64, (0.0205,) * 8, (64,) * 8, 0),
        window_of_periods(True, 4, (0.0082,) * 8, (4,) * 8, 0),
    )
    cal = Calibration(windows=windows, last_ran_on=True, run=20)
    state = PolicyState(last_step=99, accept_mean=2.5, accept_samples=40, calibration=cal)
    far = bracket(cal, False, 64, min_samples=8)
    assert far is not None and far.low == pytest.approx(0.00496)
    assert not is_settled(CALIBRATED, state, 64, current=True)
    near = bracket(cal, False, 4, min_samples=8)
    assert near is not None and near.low == pytest.approx(0.00496 + 0.00018 * 2, rel=0.05)


def test_no_probe_of_speculation_far_above_where_it_already_lost() -> None:
    """Off measured at 64 and speculation at 16 and 32, where it loses already: at 64 the
    bound says speculation cannot win, so the running off state is not probed there."""
    state = measured((16, 32))
    cal = state.calibration
    assert cal is not None
    off_64 = window_of_periods(False, 64, (seconds(64, False),) * 8, (64,) * 8, 0)
    state = replace(state, calibration=replace(cal, windows=(*cal.windows, off_64)))
    assert is_settled(CALIBRATED, state, 64, current=False)
    assert not is_settled(CALIBRATED, state, 64, current=True)


def test_a_prediction_above_the_measured_buckets_keeps_to_the_bound() -> None:
    """A step flat while memory bound, then steep: the median of all pairwise slopes is the flat
    part's, and extrapolated with it a larger batch would look cheap (the state speculating, whose
    verify turns compute bound first, too cheap); above the largest bucket a prediction grows at
    least as steeply as below it, as the bracket's low bound does."""

    def knee(batch_size: int) -> float:
        return 0.008 + 0.0004 * max(0, batch_size - 8)

    windows = tuple(
        window_of_periods(True, b, (knee(b),) * 8, (b,) * 8, 0) for b in (1, 2, 4, 8, 16)
    )
    cal = Calibration(windows=windows)
    low = bracket(cal, True, 32, min_samples=8)
    found = predict(cal, True, 32, 8)
    assert low is not None and found is not None and not found.is_measured
    assert found.seconds == pytest.approx(knee(32))  # the knee's slope, not the flat part's
    assert found.seconds >= low.low
    # between measured buckets nothing changes: the interpolation
    below = predict(cal, True, 12, 8)
    assert below is not None and below.seconds == pytest.approx((knee(8) + knee(16)) / 2)


def test_requests_arriving_during_an_acceptance_probe_end_it_before_their_prefill() -> None:
    """A draft held off for accepting too little is probed at 2 requests, and a wave of 126
    arrives while the probe runs: the probe ends now, by the verifies it saw, not a few
    results later with the 128 requests running (live, a probe so ran into a wave of 128 and
    switched off among them: that turn 13% behind no speculation). A poor draft (1.2 a
    verify) goes back off, held; a good one (3.4) passes, and the arrivals are decided as
    any: at 128 requests, where the off state is the better, off now."""
    policy = CalibratedPolicy(CALIBRATED)
    gate = Probe(True, 95, samples=3, is_gate=True)
    for accept, on, reason, mode in (
        (1.2, False, Reason.LOW_ACCEPTANCE, Mode.HELD_OFF),
        (3.4, False, Reason.ARRIVAL, Mode.NORMAL),
    ):
        base = measured((1, 2, 64, 128), accept=accept)
        assert base.calibration is not None
        cal = replace(base.calibration, probe=gate)
        state = replace(base, mode=Mode.PROBING, accept_samples=5, failed_probes=2, calibration=cal)
        after, decision = policy.advance(state, replace(arrival(128), arriving=126))
        assert (decision.spec_on, decision.changed, decision.reason) == (on, True, reason)
        assert after.mode is mode and after.calibration is not None
        assert after.calibration.probe is None
        if mode is Mode.HELD_OFF:  # the next probe a doubled spacing later
            assert after.failed_probes == 3 and after.calibration.gate_free_at > 100
        else:
            assert after.failed_probes == 0
    # with no verify seen yet, the probe goes on
    base = measured((1, 2, 64, 128), accept=1.2)
    assert base.calibration is not None
    early = replace(base, mode=Mode.PROBING, accept_samples=0,
                    calibration=replace(base.calibration, probe=gate))  # fmt: skip
    _, waiting = policy.advance(early, replace(arrival(128), arriving=126))
    assert (waiting.spec_on, waiting.changed) == (True, False)
