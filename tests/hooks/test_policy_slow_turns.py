"""A slowdown that lasts a turn does not decide for the calibrated policy (``Window.steady``).

Live (call 49, an H200), a speculating server ran a whole turn 1.5-1.9 times slower, one turn in
seven; a state measured in such a turn and the other state measured in the next were compared
across the slowdown. Each window now remembers its latest blocks of a window's worth of periods
and reads a step as the fastest of them at its batch size or more: the host and the GPU only
ever slow a step.
"""

from __future__ import annotations

import random

from tests.hooks.calibrated_support import DEFAULTS, QUIET, Machine, Server, on_share

from sgtrace.payload.calibration import Calibration, fold
from sgtrace.payload.policies import make_policy
from sgtrace.payload.window import FLOOR_BLOCKS, Window, window_of_periods

LIMIT = 16  # PolicyConfig.window_results


def fed(periods: list[float], sizes: list[int] | None = None) -> Window:
    window = window_of_periods(True, 16, (periods[0],), ((sizes or [16])[0],), 0, block=LIMIT)
    for i, period in enumerate(periods[1:], start=1):
        size = sizes[i] if sizes else 16
        window = window.with_period(i, size, period, LIMIT)
    return window


def test_a_slow_stretch_reads_as_the_step_before_it() -> None:
    window = fed([0.010] * 32 + [0.018] * 16)
    assert window.center == 0.018  # the latest periods: all slow
    assert window.steady == 0.010  # an earlier block at the same size ran faster
    assert window.clean == 0.010 and window.seconds == 0.010


def test_a_block_faster_by_noise_alone_is_no_slowdown() -> None:
    """Blocks within SLOWED of each other differ by noise: the latest center stands (the
    fastest of seven blocks would read a state that ran long cheaper than one just probed)."""
    window = fed([0.0100] * 16 + [0.0105] * 16)
    assert window.steady == window.center == 0.0105
    window = fed([0.0100] * 16 + [0.0115] * 16)
    assert window.steady == 0.0100


def test_a_lasting_slowdown_shows_once_it_fills_the_remembered_blocks() -> None:
    """Once the blocks remembered and the window itself all ran slow."""
    window = fed([0.010] * 16 + [0.018] * (16 * (FLOOR_BLOCKS + 1)))
    assert window.steady == 0.018
    window = fed([0.010] * 16 + [0.018] * (16 * FLOOR_BLOCKS))
    assert window.steady == 0.010


def test_a_faster_block_at_a_smaller_batch_is_no_bound() -> None:
    """A wave's tail at 9 requests steps faster than the bucket's 16: not a floor for 16."""
    window = fed([0.008] * 16 + [0.012] * 16, sizes=[9] * 16 + [16] * 16)
    assert window.size == 16 and window.steady == 0.012


def test_a_calibration_with_its_blocks_survives_json() -> None:
    cal = Calibration()
    for step in range(40):
        cal = fold(cal, step, 4, True, 0.010 if step < 20 else 0.020, LIMIT)
    window = cal.window_of(True, 4)
    assert window is not None and window.floors and window.steady < window.center
    again = Calibration.from_dict(cal.to_dict())
    assert again == cal and again.window_of(True, 4).steady == window.steady  # type: ignore[union-attr]


def test_a_slow_turn_at_one_request_does_not_shut_the_acceptance_gate() -> None:
    """Start-up at one request measures both states (speculation 5.3 ms, the off state 3.6 ms,
    accept 2.5: a breakeven of 1.47); then a turn 1.8 times slower, speculating: read as its own
    steps, the breakeven it implies (9.5 / 3.6 = 2.65) would shut the gate on a draft that pays
    70% at one request, and the gate, probing at one request, would stay shut."""
    machine = Machine(accept=2.5, on_s=0.0053, on_per_req_s=0.0, off_s=0.0036, off_per_req_s=0.0)
    rng = random.Random(3)
    server = Server(make_policy(DEFAULTS))

    def lengths(on: bool) -> tuple[float, ...] | None:
        return (2.5 + rng.uniform(-0.1, 0.1),) if on else None

    steps = [server.step(machine, 1, lengths, QUIET, rng) for _ in range(200)]
    assert on_share(steps[-100:]) == 1.0
    slow = [server.step(machine, 1, lengths, QUIET, rng, scale=1.8) for _ in range(60)]
    after = [server.step(machine, 1, lengths, QUIET, rng) for _ in range(100)]
    reasons = {s.decision.reason.value for s in slow + after}
    assert "low-acceptance" not in reasons, reasons
    assert on_share(slow + after) == 1.0
