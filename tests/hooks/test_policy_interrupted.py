"""The calibrated policy's model of interruptions: a decode result after another batch (a
prefill, or idle time and a prefill) is an interrupted period; the model weighs it by how often
it comes, drops idle time, and reads it only where both states measured its share."""

from __future__ import annotations

import pytest

from sgtrace.payload.calibration import Calibration, fold, predict, stalls_after
from sgtrace.payload.window import window_of_periods

WINDOW = 16


def _fold(cal: Calibration, step: int, size: int, on: bool, period: float, interrupted: bool):
    if interrupted:
        return fold(cal, step, size, on, None, WINDOW, interrupted=period)
    return fold(cal, step, size, on, period, WINDOW)


def _run(on: bool, size: int, every: int, steps: int, step_s: float, stall_s: float, cal=None):
    """``steps`` results of one state, every ``every``-th after a prefill of ``stall_s``."""
    cal = cal or Calibration()
    start = cal.windows and max(w.last_step for w in cal.windows) + 1 or 0
    for i in range(steps):
        interrupted = every > 0 and i % every == every - 1
        period = step_s + (stall_s if interrupted else 0.0)
        cal = _fold(cal, start + i, size, on, period, interrupted)
    return cal


def test_an_interrupted_period_is_a_stall_weighed_by_its_share() -> None:
    cal = _run(False, 64, every=4, steps=65, step_s=0.005, stall_s=0.006)
    window = cal.window_of(False, 64)
    assert window is not None
    assert len(window.periods) == WINDOW and len(window.stalls) == WINDOW
    assert window.interrupted == pytest.approx(0.25)
    assert (window.center, window.busy) == pytest.approx((0.005, 0.011))
    assert window.seconds == pytest.approx(0.75 * 0.005 + 0.25 * 0.011)
    assert window.clean == pytest.approx(0.005)


def test_idle_time_is_no_stall() -> None:
    cal = _run(True, 8, every=0, steps=12, step_s=0.010, stall_s=0.0)
    idle = _fold(cal, 12, 8, True, 2.0, interrupted=True)  # the next requests after 2 s idle
    assert idle.window_of(True, 8) == cal.window_of(True, 8)
    prefill = _fold(cal, 12, 8, True, 0.025, interrupted=True)  # a prefill of 15 ms
    assert prefill.window_of(True, 8).stalls == (0.025,)
    # a bucket not measured yet: bounded by one of half its batch size or more ...
    near = _fold(cal, 12, 16, True, 0.030, interrupted=True)
    assert near.window_of(True, 16).stalls == (0.030,)
    assert _fold(cal, 12, 16, True, 2.0, interrupted=True).window_of(True, 16) is None
    # ... and not at all by one far below it, nor by the other state's
    assert _fold(cal, 12, 128, True, 0.2, interrupted=True).window_of(True, 128) is None
    assert _fold(cal, 12, 8, False, 0.02, interrupted=True).window_of(False, 8) is None


def test_interruptions_are_read_only_where_both_states_measured_their_share() -> None:
    cal = _run(False, 64, every=2, steps=40, step_s=0.007, stall_s=0.006)
    cal = _run(True, 64, every=0, steps=10, step_s=0.025, stall_s=0.0, cal=cal)
    assert stalls_after(cal, 64, WINDOW) is None  # speculation: 9 results, its share unknown
    off = predict(cal, False, 64, 8, stalls_after(cal, 64, WINDOW))
    assert off is not None and off.seconds == pytest.approx(0.007)  # read without them
    cal = _run(True, 64, every=1, steps=12, step_s=0.025, stall_s=0.006, cal=cal)
    assert stalls_after(cal, 64, WINDOW) == WINDOW
    off = predict(cal, False, 64, 8, WINDOW)
    on = predict(cal, True, 64, 8, WINDOW)
    assert off is not None and on is not None
    assert off.seconds == pytest.approx(0.5 * 0.007 + 0.5 * 0.013, rel=0.05)
    assert on.seconds > 0.025  # the interrupted share counted, 12 of 21
    assert on.relative_error > 0  # the share is a sample


def test_a_window_round_trips_with_its_stalls() -> None:
    cal = _run(False, 4, every=3, steps=30, step_s=0.005, stall_s=0.004)
    again = Calibration.from_dict(cal.to_dict())
    assert again == cal
    assert again.window_of(False, 4).seconds == cal.window_of(False, 4).seconds
    old = cal.to_dict()  # a trace written before interruptions were kept
    for w in old["windows"]:  # type: ignore[union-attr]
        for key in ("stalls", "kinds", "busy", "busy_mad"):
            del w[key]
    window = Calibration.from_dict(old).window_of(False, 4)
    assert window is not None and window.seconds == window.center


def test_a_window_without_consecutive_periods_reads_its_stalls() -> None:
    window = window_of_periods(True, 128, (), (128, 128), 9, stalls=(0.040, 0.042))
    assert (window.count, window.clean, window.seconds) == (2, 0.041, 0.041)
    assert window.cost(None) == window.cost(1) == (0.041, window.relative_error)
