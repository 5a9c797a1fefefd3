"""What a switch with requests running costs (``sgtrace.payload.switchcost``): measured from the
period that holds the re-prefill, kept out of the calibration's interruptions, and charged to
the probes taken with requests running."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tests.hooks.calibrated_support import QUIET, Machine, levels, simulate, toggles

from sgtrace.payload.calibrated import CalibratedPolicy, spacing
from sgtrace.payload.calibration import Calibration, predict
from sgtrace.payload.policy import Observation, PolicyConfig, PolicyKind
from sgtrace.payload.rules import PolicyState
from sgtrace.payload.switchcost import (
    WITHIN,
    cost_at,
    fold_cost,
    line_of,
    probe_spacing,
    switch_steps,
)
from sgtrace.payload.window import window_of_periods

CALIBRATED = PolicyConfig(kind=PolicyKind.CALIBRATED)
MACHINE = Machine(accept=2.5)  # off wins at 64, speculation at 4 (crossover 37)


def measured_state(fit: tuple[float, ...] = ()) -> PolicyState:
    """Both states measured at 4, 16 and 64 requests on :data:`MACHINE`."""
    windows = tuple(
        window_of_periods(on, b, (MACHINE.seconds(b, on),) * 16, (b,) * 16, 10)
        for on in (False, True)
        for b in (4, 16, 64)
    )
    cal = Calibration(windows=windows, last_ran_on=False, run=20)
    return PolicyState(
        last_step=99, accept_mean=2.5, accept_samples=40, calibration=cal, switch_fit=fit
    )


def test_the_period_after_a_switch_measures_its_cost_and_a_line_fits_the_costs() -> None:
    """A switch decided with 64 requests running is pending for WITHIN results; the largest
    interrupted period among them (a prefill of a few arrivals is smaller), less the step that
    ran, in plain steps at 64, is its cost. No period of those results counts as an
    interruption of the state. Switches at one batch size give their mean (the latest weighs
    as much as all before); at another, a line through them."""
    policy = CalibratedPolicy(CALIBRATED, measured_state())
    off = MACHINE.seconds(64, False)

    def after_switch(state: PolicyState, step: int, running: int, cost: float) -> PolicyState:
        state = replace(state, switch_step=step, switch_running=running, switch_worst=0.0)
        at = MACHINE.seconds(running, False)
        periods = [(off, None), (None, 2 * off), (None, cost * at + off), (off, None)]
        for k, (period, interrupted) in enumerate(periods, start=1):
            state, _ = policy.advance(state, Observation(step + k, 64, None, False, period, interrupted))  # fmt: skip
            assert state.switch_step == (step if k < WITHIN else -1)
        return state

    after = after_switch(policy.state, 100, 64, 12.0)
    assert line_of(after.switch_fit) == pytest.approx((12.0, 0.0))
    window = (after.calibration or Calibration()).window_of(False, 64)
    assert window is not None and window.stalls == ()
    again = after_switch(after, 200, 64, 18.0)
    assert cost_at(again.switch_fit, 64) == pytest.approx(16.0)  # (12 + 2 * 18) / 3
    assert cost_at(again.switch_fit, 1) == pytest.approx(16.0)  # one batch size: no slope
    # a switch at 4 requests that cost 10 steps: a line through both sizes, fixed mostly
    third = after_switch(again, 300, 4, 10.0)
    a, b = line_of(third.switch_fit)
    assert 9.0 < a < 11.0 and 0.0 < b < 0.15, (a, b)
    assert cost_at(third.switch_fit, 4) == pytest.approx(10.0, abs=0.6)


def test_a_switch_unseen_within_its_results_is_dropped_and_one_at_idle_is_not_pending() -> None:
    policy = CalibratedPolicy(CALIBRATED, measured_state())
    state = replace(policy.state, switch_step=100, switch_running=64)
    off = MACHINE.seconds(64, False)
    for step in range(101, 101 + WITHIN + 1):
        state, _ = policy.advance(state, Observation(step, 64, None, False, off))
    assert (state.switch_step, state.switch_fit) == (-1, ())
    idle = Observation(200, 64, None, False, arriving=64, cohort=64, cohort_tokens=4)
    after, decision = policy.advance(replace(state, accept_mean=3.4), idle)
    assert after.switch_step == -1  # nothing ran: nothing retracted, whatever was decided
    assert decision.step == 200


def test_a_switch_is_charged_in_steps_of_the_state_that_runs() -> None:
    state = measured_state(fold_cost((), 64, 7.4))
    cal = state.calibration or Calibration()
    off = predict(cal, False, 64, CALIBRATED.min_samples)
    on = predict(cal, True, 64, CALIBRATED.min_samples)
    assert off is not None and on is not None
    steps = switch_steps(CALIBRATED, state, cal, 64, True)
    assert steps == pytest.approx(7.4 * off.seconds / on.seconds)
    assert switch_steps(CALIBRATED, replace(state, switch_fit=()), cal, 64, False) == 1.0
    extra = probe_spacing(CALIBRATED, state, cal, 64, False)
    assert extra == pytest.approx(2 * 7.4 / CALIBRATED.probe_share, abs=1)


def test_a_simulated_server_measures_the_switch_it_pays_and_probes_less_for_it() -> None:
    """Through ``bench/policy_sim.py``'s server, which charges a switch
    ``switch_steps(n)`` plain steps, and the policy measures it: at 64 requests, close to the crossover, re-probes of speculation come at least as far apart as the probe budget asks
    with their switches' steps in it, and farther than where switches cost nothing."""
    from bench.policy_sim import switch_steps as charged

    machine = Machine(accept=3.0)  # crossover near 64: both states close there
    schedule = levels(4, 64, hold=3000)
    paid = simulate(machine, schedule, QUIET)
    free = simulate(machine, schedule, QUIET, free_switches=True)
    probes = [t[0] for t in toggles(paid) if t[3] == "explore" and t[1] == 64]
    free_probes = [t[0] for t in toggles(free) if t[3] == "explore" and t[1] == 64]
    assert len(probes) >= 2 and len(free_probes) >= 2, (probes, free_probes)
    later = zip(probes[1:], free_probes[1:], strict=False)  # each re-probe later than if free
    assert all(paid_at > free_at for paid_at, free_at in later), (probes, free_probes)
    gaps = [b - a for a, b in zip(probes, probes[1:], strict=False)]
    assert min(gaps) >= spacing(CALIBRATED, 0) + 2 * charged(64) / CALIBRATED.probe_share


def test_requests_arriving_end_a_pending_measurement() -> None:
    """A switch in a wave's tail: the wave ends, the server idles, the next wave arrives. Its
    first period holds the idle seconds and its prefill, not the switch's: the arrival drops
    the pending measurement, the rate stays unknown."""
    policy = CalibratedPolicy(CALIBRATED, measured_state())
    off = MACHINE.seconds(4, False)
    state = replace(policy.state, switch_step=100, switch_running=4)
    state, _ = policy.advance(state, Observation(101, 4, None, False, off))
    wave = Observation(102, 64, None, False, arriving=64, wave_lengths=(128,) * 64)
    state, _ = policy.advance(state, wave)
    assert state.switch_step == -1
    for step, interrupted in ((103, 2.0), (104, None), (105, None)):  # 2 s idle, then steps
        period = None if interrupted else MACHINE.seconds(64, False)
        state, _ = policy.advance(state, Observation(step, 64, None, False, period, interrupted))
    assert state.switch_fit == ()
