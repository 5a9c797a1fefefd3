"""What a switch with requests running costs, as the server measures it (:mod:`.calibrated`).

The plain off state switches by retracting every running request: the batch in flight is
dropped for them and they are prefilled again, without CUDA graphs (:mod:`.plainoff`). The
hook sees that prefill as an interrupted period within :data:`WITHIN` results of the
decision; under a closed loop the prefills of arriving requests interrupt results too, but
they are of a few requests, the switch's of all that ran: the largest interrupted period less
a step (the least consecutive period among those results, else the predicted step) is the
switch's cost, in plain steps at the batch size it retracted (``t_off(n)``). The costs
measured are fitted, by least squares over their batch sizes, a latest switch weighing as
much as all before it (:attr:`~.rules.PolicyState.switch_fit`), to ``a + b * n`` plain steps
(:func:`cost_at`: ``b`` only where the switches measured spread over batch sizes, else the
mean cost): a switch with ``n`` requests running is predicted to cost ``cost_at(n) *
t_off(n)``. Live (an H100, the 24-layer target) a switch cost 8 plain steps with one request
running and 10-17 with 17-58 (call 40; 11.5 with 128 in call 36): mostly a fixed cost, the
re-admitted requests' prefill a batch and the overlap scheduler's drained pipeline, not one a
request (``bench/results/live/sweep/README.md``, "Calls 40-43"). Until a switch with requests
running was measured a switch costs the step in flight.

Interrupted periods within a pending switch's results are kept out of the calibration's
interruptions (:func:`~.calibration.fold`): one is the switch's, not a prefill that the state's
results share. Requests arriving before the four results (the hook asks the policy on them)
end the measurement unfinished: after a wave's tail the next period holds the idle time and
the next wave's prefill.

A probe with requests running pays two switches; :func:`probe_spacing` charges them to the
probe budget (:func:`~.calibrated.spacing`: probed results at most ``probe_share`` of all),
so a probe among a hundred requests waits as long as the steps its switches cost ask; an
acceptance probe (the gate's) likewise.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .calibration import Calibration, predict
from .policy import Decision, Observation, PolicyConfig
from .rules import PolicyState

WITHIN = 4  # results after the decision: the lag of two, the result dropped, the re-prefilled


def record(state: PolicyState, obs: Observation, decision: Decision) -> PolicyState:
    """``state`` after ``decision``: a switch with requests running is pending measurement."""
    running = obs.batch_size - obs.arriving if obs.arriving else obs.batch_size
    if not decision.changed or running < 1:
        return state
    return replace(
        state, switch_step=obs.step, switch_running=running, switch_worst=0.0, switch_least=0.0
    )


def measure(
    config: PolicyConfig, state: PolicyState, obs: Observation, cal: Calibration, ran_on: bool
) -> tuple[tuple[float, ...], int, float, float, float | None]:
    """After ``obs``: the fit; the pending switch's step (-1: none), its largest interrupted
    and least consecutive period so far; the interrupted period the calibration folds (None
    within a pending switch's results: one of them is the switch's, not a prefill that the
    state's results share)."""
    interrupted = obs.interrupted_period_s
    if state.switch_step < 0:
        return state.switch_fit, -1, 0.0, 0.0, interrupted
    worst, least, period = state.switch_worst, state.switch_least, obs.step_period_s
    if interrupted is not None:
        worst = max(worst, interrupted)
    if period is not None:
        least = min(least, period) if least > 0.0 else period
    if obs.step - state.switch_step < WITHIN:
        return state.switch_fit, state.switch_step, worst, least, None
    fit = _with_cost(config, state, cal, ran_on, obs.batch_size, worst, least)
    return fit, -1, 0.0, 0.0, None


def _with_cost(
    config: PolicyConfig,
    state: PolicyState,
    cal: Calibration,
    ran_on: bool,
    batch_size: int,
    worst: float,
    least: float,
) -> tuple[float, ...]:
    """The fit with the pending switch's cost: its largest interrupted period less a step (the
    least consecutive period seen, else the predicted step of the state that ran), in plain
    steps at the requests it retracted (predicted, else that step)."""
    running, fit = state.switch_running, state.switch_fit
    step = least
    if step <= 0.0:
        ran = predict(cal, ran_on, batch_size, config.min_samples)
        step = ran.seconds if ran is not None else 0.0
    off = predict(cal, False, running, config.min_samples)
    unit = off.seconds if off is not None else step
    if worst <= step or step <= 0.0 or unit <= 0.0:
        return fit
    cost = max(1.0, (worst - step) / unit)  # the step in flight at least
    return fold_cost(fit, running, cost)


def fold_cost(fit: tuple[float, ...], running: int, cost: float) -> tuple[float, ...]:
    """``fit`` (weight, and the weighted sums of ``n``, ``n**2``, the cost and ``n`` times
    the cost) with a switch of ``running`` requests that cost ``cost`` plain steps, the older
    switches' weight halved.

    >>> fit = fold_cost(fold_cost((), 1, 8.0), 64, 12.0)
    >>> [round(x, 2) for x in line_of(fit)], round(cost_at(fit, 128), 1)
    ([7.94, 0.06], 16.1)
    """
    weight, sn, snn, sc, snc = fit or (0.0,) * 5
    n = float(running)
    return (weight / 2 + 1, sn / 2 + n, snn / 2 + n * n, sc / 2 + cost, snc / 2 + n * cost)


def line_of(fit: tuple[float, ...]) -> tuple[float, float]:
    """The fit's ``a`` and ``b`` (plain steps and plain steps a request): ``b`` the weighted
    least squares' slope, not below 0, where the switches' batch sizes spread (their standard
    deviation a quarter of their mean or more), else 0 and ``a`` their mean cost; (1, 0)
    before any switch (the step in flight)."""
    if not fit or fit[0] <= 0.0:
        return 1.0, 0.0
    weight, sn, snn, sc, snc = fit
    n, c = sn / weight, sc / weight
    var = snn / weight - n * n
    slope = (snc / weight - n * c) / var if var > 0.0 and var >= (n / 4) ** 2 else 0.0
    slope = max(0.0, slope)
    return c - slope * n, slope


def cost_at(fit: tuple[float, ...], batch_size: int) -> float:
    """A switch's predicted cost with ``batch_size`` requests running, in plain steps there:
    the fitted line, the step in flight at least."""
    a, b = line_of(fit)
    return max(1.0, a + b * batch_size)


def switch_steps(
    config: PolicyConfig, state: PolicyState, cal: Calibration, batch_size: int, spec_on: bool
) -> float:
    """A switch's predicted cost with ``batch_size`` requests running, in steps of
    ``spec_on``'s state there: ``cost_at(n) * t_off(n) / t(n)``, the ratio of the steps
    taken as 1 where either cannot be predicted."""
    off = predict(cal, False, batch_size, config.min_samples)
    mine = predict(cal, spec_on, batch_size, config.min_samples)
    ratio = off.seconds / mine.seconds if off and mine and mine.seconds > 0 else 1.0
    return cost_at(state.switch_fit, batch_size) * ratio


def probe_spacing(
    config: PolicyConfig, state: PolicyState, cal: Calibration, batch_size: int, spec_on: bool
) -> int:
    """Steps a probe with ``batch_size`` requests running waits beyond the probe spacing: its
    two switches' steps, at ``probe_share`` of the results."""
    return math.ceil(
        2.0 * switch_steps(config, state, cal, batch_size, spec_on) / config.probe_share
    )


__all__ = [
    "WITHIN",
    "cost_at",
    "fold_cost",
    "line_of",
    "measure",
    "probe_spacing",
    "record",
    "switch_steps",
]
