"""Waves (``sgtrace.payload.wave``) and a bucket's own slope (``window._slope``): requests of
known lengths that make most of the batch are served in the state that finishes all of them
first, tail included; and a wave's tail, which spends its steps all through a bucket, tells
that bucket's step at its top by the slope its own periods show."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from sgtrace.payload.calibrated import CalibratedPolicy
from sgtrace.payload.calibration import Calibration, predict
from sgtrace.payload.policy import Observation, PolicyConfig, PolicyKind, Reason
from sgtrace.payload.rules import PolicyState
from sgtrace.payload.wave import wave_lengths, wave_of
from sgtrace.payload.window import window_of_periods

CALIBRATED = PolicyConfig(kind=PolicyKind.CALIBRATED)


def seconds(batch_size: float, spec_on: bool) -> float:
    """The simulated live machine of the good draft (``bench/policy_fit.py``): at 64 requests
    a verify takes 3.36 plain steps, and an accept length of 3.4 barely pays there."""
    return 0.0050 + 0.000278 * batch_size if spec_on else 0.0050 + 0.0000277 * batch_size


def tail_window(spec_on: bool, bucket: int, sizes: tuple[int, ...], step: int = 0):
    periods = tuple(seconds(n, spec_on) for n in sizes)
    return window_of_periods(spec_on, bucket, periods, sizes, step, (), None, sizes)


def state_with(buckets: tuple[int, ...] = (16, 32, 64), accept: float = 3.4) -> PolicyState:
    """Both states measured at ``buckets``, each at its top (a full batch)."""
    windows = tuple(tail_window(on, b, (b,) * 16) for on in (False, True) for b in sorted(buckets))
    cal = Calibration(windows=windows, last_ran_on=True, run=20)
    return PolicyState(last_step=99, accept_mean=accept, accept_samples=40, calibration=cal)


def spread(count: int, low: int = 64, high: int = 192) -> tuple[int, ...]:
    return tuple(sorted(low + (high - low) * i // count for i in range(count)))


def wave_arrival(lengths: tuple[int, ...], spec_on: bool, running: int = 0) -> Observation:
    size = len(lengths) + running
    return Observation(100, size, None, spec_on, arriving=len(lengths), wave_lengths=lengths)


def test_a_tail_read_along_its_bucket_slope_predicts_the_full_batch() -> None:
    """7 periods at 64 requests and 9 at 33-45: their interquartile mean lies at no batch
    size; read along the slope the window itself shows, the curve predicts 64 as measured."""
    tail = (64,) * 7 + (45, 44, 43, 41, 39, 39, 37, 37, 33)
    cal = Calibration(
        windows=(tail_window(True, 32, (21,) * 16), tail_window(True, 64, tail)),
        last_ran_on=True,
        run=20,
    )
    found = predict(cal, True, 64, 8)
    assert found is not None and found.seconds == pytest.approx(seconds(64, True), rel=0.01)
    unread = replace(cal.windows[1], slope=0.0, period_sizes=())  # the window without sizes
    plain = window_of_periods(True, 64, unread.periods, unread.sizes, 0)
    old = Calibration(windows=(cal.windows[0], plain), last_ran_on=True, run=20)
    too_high = predict(old, True, 64, 8)
    assert too_high is not None and too_high.seconds > 1.1 * seconds(64, True)


def test_a_padded_bucket_steps_alike_all_through_and_keeps_its_center() -> None:
    """CUDA graphs pad a batch of 33 to the graph of 64: one step time in the whole bucket."""
    sizes = (64,) * 8 + (40,) * 8
    window = window_of_periods(True, 64, (0.0228,) * 16, sizes, 0, (), None, sizes)
    assert (window.slope, window.center) == (0.0, 0.0228)


def test_a_wave_is_told_with_its_lengths_where_they_make_half_the_batch() -> None:
    assert wave_lengths({128: 3, 64: 2}, 9) == (64, 64, 128, 128, 128)
    assert wave_lengths({128: 3, 64: 2}, 11) == ()  # most of the batch runs on unknown lengths
    assert wave_lengths({128: 3}, 3) == ()  # fewer than a cohort's least


def test_speculation_serves_a_spread_wave_faster_though_its_first_steps_tie() -> None:
    state = state_with()
    lengths = spread(64)
    assert state.calibration is not None
    found = wave_of(CALIBRATED, state.calibration, 3.4, lengths, 64)
    assert found is not None
    at_64 = seconds(64, True) / 3.4 / seconds(64, False)
    assert at_64 == pytest.approx(1.0, abs=0.02)  # per token at the full batch: a tie
    assert found.spec < 0.9 * found.plain  # the tail pays
    # twice as many requests: speculation loses at the wave's start by far more than the tail
    wide = replace(state, calibration=state_with((16, 32, 64, 128)).calibration)
    assert wide.calibration is not None
    lost = wave_of(CALIBRATED, wide.calibration, 3.4, spread(128), 128)
    assert lost is not None and lost.spec > lost.plain


def test_a_wave_that_speculation_serves_faster_is_held_on_to_its_tail() -> None:
    state = state_with()
    policy = CalibratedPolicy(CALIBRATED)
    lengths = spread(64)
    held, decision = policy.advance(state, wave_arrival(lengths, spec_on=False))
    assert (decision.spec_on, decision.changed, decision.reason) == (True, True, Reason.COHORT)
    assert held.calibration is not None
    until = held.calibration.cohort_until
    assert until == 100 + math.ceil(lengths[-1] / 3.4) + 3 and held.calibration.cohort_on
    # the steps at 64 alone would not switch on: without the wave's lengths it stays off
    _, steps = policy.advance(state, replace(wave_arrival(lengths, False), wave_lengths=()))
    assert (steps.spec_on, steps.changed) == (False, False)
    # while held, a result at 64 does not switch off, nor start a probe
    _, later = policy.advance(held, Observation(101, 64, (3.4,) * 64, True, 0.0228))
    assert (later.spec_on, later.reason) == (True, Reason.COHORT)


def test_no_wave_is_held_where_requests_run_or_a_bucket_is_unmeasured() -> None:
    policy = CalibratedPolicy(CALIBRATED)
    lengths = spread(64)
    # 64 arrive while 8 run off: switching on now would cost steps of the running ones
    _, running = policy.advance(state_with(), wave_arrival(lengths, False, running=8))
    assert (running.spec_on, running.changed) == (False, False)
    # nor held on where requests run: a closed loop replaces them, the batch does not drain
    kept, going = policy.advance(state_with(), wave_arrival(lengths, True, running=8))
    assert going.reason is not Reason.COHORT
    assert not (kept.calibration is not None and kept.calibration.cohort_on)
    # neither state measured at 64: an extrapolated step decides no wave
    unmeasured = state_with((16, 32))
    assert unmeasured.calibration is not None
    assert wave_of(CALIBRATED, unmeasured.calibration, 3.4, lengths, 64) is None


def test_a_wave_the_off_state_serves_faster_runs_off_until_its_first_request_ends() -> None:
    """128 requests of 64-192 tokens: speculation loses at the start by more than its tail
    wins. Off now and held while the whole wave runs; its tail is left to the steps."""
    policy = CalibratedPolicy(CALIBRATED)
    wide = state_with((16, 32, 64, 128))
    lengths = spread(128)
    after, off = policy.advance(wide, wave_arrival(lengths, True))
    assert (off.spec_on, off.changed, off.reason) == (False, True, Reason.COHORT)
    assert after.calibration is not None and not after.calibration.cohort_on
    assert after.calibration.cohort_until == 100 + lengths[0] + 3


def test_a_ragged_end_makes_speculation_lose_a_wave_its_steps_tie() -> None:
    """64 requests of 64 tokens, where speculation's step wins by 1% a token: speculating,
    each request makes 1-4 tokens a step, so they finish over several steps and the wave
    ends with its slowest. With the accept lengths' variance of the good draft (q = 0.893:
    1.07) the off state serves the wave faster; the policy sees the variance and switches
    off, where without it (a draft that always keeps as many) it holds speculation on."""
    lengths = (64,) * 64
    state = state_with()
    assert state.calibration is not None
    even = wave_of(CALIBRATED, state.calibration, 3.4, lengths, 64)
    ragged = wave_of(CALIBRATED, state.calibration, 3.4, lengths, 64, 1.07)
    assert even is not None and ragged is not None and ragged.plain == even.plain
    assert even.spec < even.plain < ragged.spec / 1.02
    assert wave_of(CALIBRATED, state.calibration, 3.4, lengths, 64, 0.0) == even
    policy = CalibratedPolicy(CALIBRATED)
    _, off = policy.advance(replace(state, accept_var=1.07), wave_arrival(lengths, True))
    assert (off.spec_on, off.reason) == (False, Reason.COHORT)
    _, kept = policy.advance(state, wave_arrival(lengths, True))
    assert (kept.spec_on, kept.changed) == (True, False)


def test_the_accept_lengths_weigh_by_their_requests() -> None:
    """A verify of 64 requests, then a wave's tail of one request a verify making 4 tokens: the
    mean moves by a request's share, not by the exponential mean's 1/8 a verify (one request a
    verify: the weight settles at 8, the exponential mean's; before, the mean of the verifies
    seen). The variance of a request's length is read from how far each verify's mean strays:
    drawn from the good draft's chain, 64 requests a verify, it comes out near the chain's."""
    import random

    policy = CalibratedPolicy(CALIBRATED)
    state, _ = policy.advance(PolicyState(), Observation(0, 64, (3.0,) * 64, True, 0.02))
    assert (state.accept_mean, state.accept_var, state.accept_weight) == (3.0, None, 64.0)
    state, _ = policy.advance(state, Observation(1, 1, (4.0,), True, 0.007))
    assert state.accept_mean == pytest.approx(3.0 + 1.0 / (64 * 7 / 8 + 1))
    one, _ = policy.advance(PolicyState(), Observation(0, 1, (2.0,), True, 0.007))
    one, _ = policy.advance(one, Observation(1, 1, (4.0,), True, 0.007))
    assert one.accept_mean == pytest.approx(2.0 + (4.0 - 2.0) / (7 / 8 + 1))
    q, rng = 0.893, random.Random(3)
    chain = _chain(q)
    var = sum(k * k * p for k, p in chain) - sum(k * p for k, p in chain) ** 2
    state, seen = PolicyState(), []
    for step in range(2000):
        lengths = tuple(
            1.0 + next((k for k in range(3) if rng.random() >= q), 3) for _ in range(64)
        )
        state, _ = policy.advance(state, Observation(step, 64, lengths, True, 0.0228))
        if step >= 100 and state.accept_var is not None:
            seen.append(state.accept_var)
    assert sum(seen) / len(seen) == pytest.approx(var, rel=0.15)


def test_a_buckets_first_probe_is_not_spaced_where_the_states_are_close() -> None:
    """Both states measured at 16 and 32, speculation at 64 and 4 too, and a probe just spent
    elsewhere (``probe_free_at`` ahead). At 64 the predicted goodputs are within the margin
    (off extrapolated): its first probe runs now, else a short level near the crossover runs
    unprobed. At 4 speculation wins by far: the probe waits for its spacing."""
    base = state_with((16, 32))
    assert base.calibration is not None
    extra = tuple(tail_window(True, b, (b,) * 16) for b in (4, 64))
    cal = replace(base.calibration, windows=base.calibration.windows + extra, probe_free_at=10_000)
    state = replace(base, calibration=cal)
    policy = CalibratedPolicy(CALIBRATED)
    _, near = policy.advance(state, Observation(100, 64, (3.4,) * 64, True, seconds(64, True)))
    assert (near.spec_on, near.reason) == (False, Reason.EXPLORE)
    _, far = policy.advance(state, Observation(100, 4, (3.4,) * 4, True, seconds(4, True)))
    assert (far.spec_on, far.changed) == (True, False)
    spent = replace(cal, windows=cal.windows + (tail_window(False, 64, (64,) * 16),))
    _, again = policy.advance(
        replace(state, calibration=spent), Observation(100, 64, (3.4,) * 64, True, 0.0228)
    )
    assert again.reason is not Reason.EXPLORE  # measured there before: spaced


def test_the_ragged_end_is_what_drawing_the_accept_lengths_gives() -> None:
    """The wave model against the process it stands for: 64 requests of 96-160 tokens, each
    verify keeping each of 3 draft tokens in a row with chance 0.893 (the good draft, A 3.40),
    drawn 300 times; each step costs the predicted step at the number of requests left. The
    mean of the draws and the model agree within 1%; without the variance the model is 2% short."""
    import random

    q, lengths = 0.893, tuple(96 + i for i in range(64))
    accept = 1 + q + q**2 + q**3
    var = sum(k * k * p for k, p in _chain(q)) - accept**2
    state = state_with()
    assert state.calibration is not None
    cal = state.calibration
    rng, total = random.Random(7), 0.0
    for _ in range(300):
        finish = []
        for length in lengths:
            made = steps = 0
            while made < length:
                made += 1 + next((k for k in range(3) if rng.random() >= q), 3)
                steps += 1
            finish.append(steps)
        for step in range(max(finish)):
            left = sum(1 for n in finish if n > step)
            found = predict(cal, True, left, CALIBRATED.min_samples)
            assert found is not None
            total += found.seconds
    drawn = total / 300
    ragged = wave_of(CALIBRATED, cal, accept, lengths, 64, var)
    even = wave_of(CALIBRATED, cal, accept, lengths, 64)
    assert ragged is not None and even is not None
    assert ragged.spec == pytest.approx(drawn, rel=0.01)
    assert even.spec < 0.98 * drawn


def _chain(q: float) -> list[tuple[int, float]]:
    """Accept lengths 1-4 and their chances: draft tokens kept in a row, 3 at most."""
    return [(1, 1 - q), (2, q * (1 - q)), (3, q * q * (1 - q)), (4, q**3)]


def test_a_wave_starts_in_the_other_state_where_that_is_unmeasured_and_may_win() -> None:
    """Speculation measured at 8-64, the off state at 8 only (load.py's levels before 64): a
    wave of 64 requests of 64 tokens arriving at an idle server finds no off step at 64 to be
    judged by. Off at the bottom of its bracket there (no faster than at 8) may win, so the
    wave starts off as a probe of that bucket: on an idle server the switch costs no step,
    where a probe into the running wave switched twice (simulated, load.py's level of 64 with
    the good draft went 0.90 -> 1.00 of the better). At 32 speculation wins even against off
    at its best: no probe; nor where requests run (the switch would cost their steps)."""
    state = _off_at_8_only((8, 16, 32, 64))
    policy = CalibratedPolicy(CALIBRATED)
    probed, explore = policy.advance(state, wave_arrival((64,) * 64, True))
    assert (explore.spec_on, explore.changed, explore.reason) == (False, True, Reason.EXPLORE)
    assert probed.calibration is not None and probed.calibration.probe is not None
    assert probed.calibration.probe.batch_size == 64 and not probed.calibration.probe.spec_on
    assert probed.wave_left == (64,) * 64  # the verdict's (below)
    _, at_32 = policy.advance(state, wave_arrival((64,) * 32, True))
    assert (at_32.spec_on, at_32.changed) == (True, False)
    _, running = policy.advance(state, wave_arrival((64,) * 56, True, running=8))
    assert (running.spec_on, running.reason) == (True, Reason.STEADY)


def _off_at_8_only(on_buckets: tuple[int, ...]) -> PolicyState:
    on = tuple(tail_window(True, b, (b,) * 16) for b in on_buckets)
    cal = Calibration(windows=(tail_window(False, 8, (8,) * 16), *on), last_ran_on=True, run=20)
    return PolicyState(last_step=99, accept_mean=3.4, accept_samples=40, calibration=cal)


def test_a_waves_probe_ends_by_what_is_left_of_the_wave() -> None:
    """The wave of 64 requests of 64 tokens starts off as a probe where speculation too is
    unmeasured at 64 (extrapolated from 8-32): the probe's off steps measure the off step
    there, and its verdict takes the tokens left to each request in both states, the ragged
    end included (the good draft's variance): the wave is held off in step. Without a wave told
    the verdict is the steps': speculation, not measured at 64, must win by the full margin
    to take the batch back (a probe that ended on a hair switched back, twice in one wave),
    and the batch stays off, unheld."""
    policy = CalibratedPolicy(CALIBRATED)
    for spread, told, reason in ((1.07, True, Reason.COHORT), (1.07, False, Reason.MEASURED)):
        state = replace(_off_at_8_only((8, 16, 32)), accept_var=spread)
        probed, _ = policy.advance(state, wave_arrival((64,) * 64, True))
        after = probed if told else replace(probed, wave_left=())
        for step in range(100, 112):  # the probe's off steps at 64 (the first one uncounted)
            after, decision = policy.advance(
                after, Observation(step, 64, None, False, seconds(64, False))
            )
            if decision.reason is not Reason.STEADY:
                break
        assert (decision.spec_on, decision.reason) == (False, reason)
        assert after.wave_left == () and after.wave_made == 0.0 and after.calibration is not None
        assert (
            after.calibration.cohort_until > step if told else after.calibration.cohort_until == 0
        )
    assert probed.wave_made == 0.0


def test_a_wave_in_its_own_unmeasured_state_is_measured_where_it_runs_then_judged() -> None:
    """Speculation measured at 16-64, the off state at 16-32 only, and the server off (a
    warm-up wave of short requests, a cohort, had switched it off): a spread wave of 64
    arrives. The wave model needs both steps at 64; the off state is measured where it runs,
    no switch, and what is left of the wave then decides: speculation serves the tail faster,
    so the rest of the wave is held on. Simulated, the wave ran off unmeasured until its tail
    (a turn 10% longer; live, a third)."""
    on = tuple(tail_window(True, b, (b,) * 16) for b in (16, 32, 64))
    off = tuple(tail_window(False, b, (b,) * 16) for b in (16, 32))
    cal = Calibration(windows=(*off, *on), last_ran_on=False, run=20)
    state = PolicyState(last_step=99, accept_mean=3.4, accept_samples=40, calibration=cal)
    policy = CalibratedPolicy(CALIBRATED)
    lengths = spread(64)
    after, first = policy.advance(state, wave_arrival(lengths, spec_on=False))
    assert (first.spec_on, first.changed, first.reason) == (False, False, Reason.EXPLORE)
    assert after.calibration is not None and after.calibration.probe is not None
    assert after.calibration.probe.in_place and after.wave_left == lengths
    decision = first
    for step in range(100, 112):  # off steps at 64, all counted: no switch came before them
        after, decision = policy.advance(
            after, Observation(step, 64, None, False, seconds(64, False))
        )
        if decision.reason is not Reason.STEADY:
            break
    assert (decision.spec_on, decision.changed, decision.reason) == (True, True, Reason.COHORT)
    assert after.calibration is not None and after.calibration.probe is None
    assert after.calibration.cohort_on and after.wave_left == ()
    assert step == 107  # the off state's 8 steps (min_samples) measured its bucket
    # speculation unmeasured in its own state instead: measured where it runs, and kept on
    mirrored = replace(
        state, calibration=Calibration(windows=(*on[:2], *off, tail_window(False, 64, (64,) * 16)),
                                       last_ran_on=True, run=20)
    )  # fmt: skip
    kept, measuring = policy.advance(mirrored, wave_arrival(lengths, spec_on=True))
    assert (measuring.spec_on, measuring.changed, measuring.reason) == (True, False, Reason.EXPLORE)
    assert kept.calibration is not None and kept.calibration.probe is not None
    assert kept.calibration.probe.in_place and kept.calibration.probe.spec_on


def test_a_tie_on_an_idle_wave_goes_to_the_state_its_steps_prefer() -> None:
    """A wave of 64 requests of one length, the good draft (3.5 a verify): its ragged end
    takes speculation's 4% lead at 64 back, and the wave model ties (within the margin). The
    server is off, because the turn's warm-up requests (a cohort of a few tokens) had
    switched it off: it no longer keeps the state it finds but takes the one the steps
    prefer by the switching margin, on (idle, the switch costs no step). Live, a25's one
    length at 32 ran every other turn off so, 11-17% behind EAGLE-3 those turns (the wave
    model, its ragged end included, had it a tie). Held either way: the step rule, blind to
    the ragged end, does not switch within the wave."""
    policy = CalibratedPolicy(CALIBRATED)
    state = replace(state_with(), accept_mean=3.5, accept_var=1.07)
    assert state.calibration is not None
    found = wave_of(CALIBRATED, state.calibration, 3.5, (128,) * 64, 64, 1.07)
    assert found is not None and abs(found.spec / found.plain - 1.0) < CALIBRATED.min_margin
    held, decision = policy.advance(state, wave_arrival((128,) * 64, spec_on=False))
    assert (decision.spec_on, decision.changed, decision.reason) == (True, True, Reason.COHORT)
    assert held.calibration is not None and held.calibration.cohort_on
    assert held.calibration.cohort_until == 100 + math.ceil(128 / 3.5) + 3  # the whole wave
    _, later = policy.advance(held, Observation(101, 64, (3.5,) * 64, True, seconds(64, True)))
    assert (later.spec_on, later.reason) == (True, Reason.COHORT)
    # from on, the same wave stays on (the steps prefer it too)
    _, kept = policy.advance(state, wave_arrival((128,) * 64, spec_on=True))
    assert (kept.spec_on, kept.changed, kept.reason) == (True, False, Reason.COHORT)
