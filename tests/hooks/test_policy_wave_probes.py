"""Where the calibrated policy probes while waves arrive (``sgtrace.payload.probes.may_explore``,
``sgtrace.payload.arrivals``): at a wave's arrival on an idle server, one switch with nothing
running, not in the middle of a wave, two switches with all of it running."""

from __future__ import annotations

from dataclasses import replace

from sgtrace.payload.calibrated import CalibratedPolicy
from sgtrace.payload.calibration import Calibration
from sgtrace.payload.goodput import is_settled, may_win
from sgtrace.payload.policy import Observation, PolicyConfig, PolicyKind, Reason
from sgtrace.payload.probes import spacing
from sgtrace.payload.rules import Mode, PolicyState
from sgtrace.payload.window import Window, window_of_periods

CALIBRATED = PolicyConfig(kind=PolicyKind.CALIBRATED)
ACCEPT = 1.9  # speculation wins at 16 requests, by less than the off state's bracket rules out


def seconds(batch_size: int, spec_on: bool) -> float:
    return 0.0050 + (0.000278 if spec_on else 0.0000277) * batch_size


def measured(spec_on: bool, bucket: int) -> Window:
    sizes = (bucket,) * 16
    periods = tuple(seconds(bucket, spec_on) for _ in sizes)
    return window_of_periods(spec_on, bucket, periods, sizes, 0, (), None, sizes)


def first_probe_due(wave_at: int = -1, wave_gap: int = 55) -> PolicyState:
    """Speculation measured at 1-16 requests, the off state at one request only (a start-up
    probe): at 16 the off state cannot beat speculation's prediction by ``min_margin`` even at
    its best, yet its bracket does not settle the decision, so its bucket's first probe is due
    (live, the fair draft's level of 16 probed so, among a running wave's 16 requests)."""
    on = tuple(measured(True, b) for b in (1, 2, 4, 8, 16))
    cal = Calibration(windows=(measured(False, 1), *on), last_ran_on=True, run=20)
    return PolicyState(
        last_step=99,
        accept_mean=ACCEPT,
        accept_samples=40,
        calibration=cal,
        wave_at=wave_at,
        wave_gap=wave_gap if wave_at >= 0 else -1,
        wave_bucket=16,
    )


def running(step: int = 100) -> Observation:
    return Observation(step, 16, (ACCEPT,) * 16, True, seconds(16, True))


def wave(step: int = 100, already: int = 0) -> Observation:
    lengths = (128,) * (16 - already)
    return Observation(step, 16, None, True, arriving=len(lengths), wave_lengths=lengths)


def test_the_state_is_where_a_first_probe_is_due_and_no_wave_rule_probes() -> None:
    state = first_probe_due()
    assert not may_win(CALIBRATED, state, 16, True)  # so the wave rules alone never probed it
    assert not is_settled(CALIBRATED, state, 16, True)


def test_a_probe_due_among_running_requests_waits_for_the_next_waves_arrival() -> None:
    """A wave arrived on an idle server 40 steps ago: no probe among its running requests."""
    policy = CalibratedPolicy(CALIBRATED)
    _, held = policy.advance(first_probe_due(wave_at=60), running())
    assert (held.spec_on, held.changed) == (True, False)
    assert held.reason is not Reason.EXPLORE


def test_without_waves_the_probe_runs_among_the_running_requests() -> None:
    """No arrival on an idle server seen; one only (a closed loop idles at its start, then its
    clients keep the batch: simulated, waiting after it cost the closed loops of 128 clients
    13-26%); two, but a spacing apart or the latest a spacing old: the probe runs where the
    requests run, as it must where the load does not pause."""
    policy = CalibratedPolicy(CALIBRATED)
    limit = spacing(CALIBRATED, 0)
    for wave_at, gap in ((-1, -1), (60, -1), (60, limit + 1), (100 - limit - 1, 55)):
        _, probe = policy.advance(first_probe_due(wave_at=wave_at, wave_gap=gap), running())
        assert (probe.spec_on, probe.changed, probe.reason) == (False, True, Reason.EXPLORE)


def test_the_next_wave_on_an_idle_server_starts_in_the_probed_state() -> None:
    """The probe runs from the wave's first step (the switch with nothing running), and what
    is left of the wave then decides (its lengths kept for the probe's verdict)."""
    policy = CalibratedPolicy(CALIBRATED)
    after, probe = policy.advance(first_probe_due(wave_at=60), wave(step=180))
    assert (probe.spec_on, probe.changed, probe.reason) == (False, True, Reason.EXPLORE)
    assert after.calibration is not None and after.calibration.probe is not None
    assert not after.calibration.probe.spec_on and after.wave_left == (128,) * 16
    assert (after.wave_at, after.wave_gap) == (180, 120)


def test_requests_joining_running_ones_are_no_wave_on_an_idle_server() -> None:
    policy = CalibratedPolicy(CALIBRATED)
    after, decision = policy.advance(first_probe_due(wave_at=60), wave(step=180, already=4))
    assert (decision.spec_on, decision.changed) == (True, False)
    assert after.wave_at == 60


def test_a_wave_tails_bucket_is_left_to_the_wave_model() -> None:
    """Waves of 128 arrive; 16 requests are what is left of one. Their arrivals probe bucket
    128 only: a bucket the tails pass is left to the wave model's predictions (simulated, the
    tails' probes cost the spread levels of 4-16 requests 0.5-1.5%)."""
    policy = CalibratedPolicy(CALIBRATED)
    state = replace(first_probe_due(wave_at=60), wave_bucket=128)
    _, held = policy.advance(state, running())
    assert (held.spec_on, held.changed) == (True, False)


def held_off_draft(wave_at: int) -> PolicyState:
    """The poor draft held off (accept length 1.2), its gate's spacing long passed, waves of
    one request arriving on an idle server (load.py's level of 1)."""
    windows = (measured(False, 1), measured(True, 1))
    cal = Calibration(windows=windows, last_ran_on=False, run=20)
    return PolicyState(
        mode=Mode.HELD_OFF,
        last_step=4999,
        accept_mean=1.2,
        accept_samples=40,
        calibration=cal,
        wave_at=wave_at,
        wave_gap=110 if wave_at >= 0 else -1,
        wave_bucket=1,
    )


def test_an_acceptance_probe_due_waits_for_the_next_request_on_an_idle_server() -> None:
    """Live, the poor draft's acceptance probes at one request switched twice among running
    requests, about 5 plain steps each: the level 1.1-1.3% behind no speculation. Now the
    probe starts with a request arriving on an idle server, the switch on costing no step."""
    policy = CalibratedPolicy(CALIBRATED)
    one = Observation(5000, 1, None, False, seconds(1, False))
    _, waiting = policy.advance(held_off_draft(wave_at=4900), one)
    assert (waiting.spec_on, waiting.changed) == (False, False)
    arrival = Observation(5000, 1, None, False, arriving=1, wave_lengths=())
    after, probe = policy.advance(held_off_draft(wave_at=4900), arrival)
    assert (probe.spec_on, probe.changed, probe.reason) == (True, True, Reason.PROBE)
    assert after.calibration is not None and after.calibration.probe is not None
    assert after.calibration.probe.is_gate and after.mode is Mode.PROBING
    _, closed_loop = policy.advance(held_off_draft(wave_at=-1), one)
    assert (closed_loop.spec_on, closed_loop.reason) == (True, Reason.PROBE)
    # requests arriving in a larger bucket: one request is a wave's tail, probed where it runs
    # (else a draft held off under waves of 16 would never be probed again)
    tail = replace(held_off_draft(wave_at=4900), wave_bucket=16)
    _, in_tail = policy.advance(tail, one)
    assert (in_tail.spec_on, in_tail.reason) == (True, Reason.PROBE)
