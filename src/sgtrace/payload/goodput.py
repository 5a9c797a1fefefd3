"""What the calibrated policy compares (:mod:`.calibrated`): each state's predicted goodput at a
batch size, per request, and the margin by which one must beat the other to switch.

Per request, speculation yields ``A`` tokens a step (the mean accept length, bonus token
included: :func:`accept_with`) in ``t_on(bs)`` seconds, the off state one token in
``t_off(bs)`` (:func:`~.calibration.predict`); the margin is ``max(min_margin, margin_z *
se)`` with ``se`` the two predictions' combined relative standard error.
"""

from __future__ import annotations

import math

from .calibration import (
    Bracket,
    Calibration,
    Prediction,
    bracket,
    bucket_of,
    predict,
    stalls_after,
)
from .policy import Observation, PolicyConfig
from .rules import PolicyState, mean


def goodputs(
    config: PolicyConfig, state: PolicyState, batch_size: int
) -> tuple[float, float, float] | None:
    """Predicted tokens per request-second on and off at ``batch_size``, and the margin a
    switch needs; None while either state or the accept length is unknown."""
    cal = state.calibration or Calibration()
    accept = state.accept_mean
    if accept is None:
        return None
    on, off = steps_at(config, cal, batch_size)
    if on is None or off is None:
        return None
    return accept / on.seconds, 1.0 / off.seconds, margin_of(config, on, off)


def steps_at(
    config: PolicyConfig, cal: Calibration, batch_size: int
) -> tuple[Prediction | None, Prediction | None]:
    """Both states' predicted steps at ``batch_size``, the interruptions read as there."""
    return cal.steps_at(batch_size, config.min_samples, config.window_results)


def margin_of(config: PolicyConfig, on: Prediction, off: Prediction) -> float:
    return max(
        config.min_margin, config.margin_z * math.hypot(on.relative_error, off.relative_error)
    )


def better_state(
    config: PolicyConfig, state: PolicyState, batch_size: int, current: bool, at_probe: bool = False
) -> bool | None:
    """The state to run at ``batch_size`` coming from ``current``: the other one only if its
    predicted goodput wins by the margin (``at_probe``: by ``min_margin``); None while a
    prediction is missing."""
    found = goodputs(config, state, batch_size)
    if found is None:
        return None
    on, off, margin = found
    margin = config.min_margin if at_probe else margin
    if current:
        return not off > on * (1.0 + margin)
    return on > off * (1.0 + margin)


def accept_with(
    config: PolicyConfig, state: PolicyState, obs: Observation
) -> tuple[float | None, int, float | None, float]:
    """The accept lengths' mean and variance with ``obs``'s, the verifies in them and their
    weight: a verify's mean weighs by its requests (the batch size), the weight of older ones
    decaying by ``1 - accept_ema_alpha`` a verify (one request a verify: the exponential mean
    of ``accept_ema_alpha``). So a wave's tail of a request or two a step sways the means no
    more than its few requests do (by the step, its last request's lengths moved the mean by
    8%). The variance of one request's length, how ragged a wave's end runs speculating
    (:mod:`.wave`), is read from how far the verify's mean strays from the mean before: ``n``
    requests' mean strays by ``var / n``. Only the verify's mean and the batch size enter, what
    a decision's record keeps (:class:`~.record.DecisionRecord`), so a replay decides alike."""
    found = obs.accept_lengths
    if not found:
        return state.accept_mean, state.accept_samples, state.accept_var, state.accept_weight
    seen, count = mean(found), max(1, obs.batch_size)
    accept = state.accept_mean
    around = seen if accept is None else accept
    spread = count * (seen - around) ** 2
    kept = 0.0 if accept is None else (1.0 - config.accept_ema_alpha) * state.accept_weight
    weight = kept + count
    share = count / weight
    var = state.accept_var  # none from the first verify: its mean strays from nothing
    if accept is not None:
        var = spread if var is None else var + share * (spread - var)
    return around + share * (seen - around), state.accept_samples + 1, var, weight


def is_settled(config: PolicyConfig, state: PolicyState, batch_size: int, current: bool) -> bool:
    """Whether ``current`` wins at ``batch_size`` by the switching margin with its own step at
    the top of its :func:`~.calibration.bracket` and the other's at the bottom of its own: then
    measuring the other state there cannot change the decision, and no probe is spent on it
    (a bucket between measured ones, or next to them, where the states are far apart)."""
    found = _other_at_best(config, state, batch_size, current)
    if found is None:
        return False
    cal, stalls, other, best = found
    mine = bracket(cal, current, batch_size, config.min_samples, stalls)
    if mine is None:
        return False
    worst = ((state.accept_mean or 1.0) if current else 1.0) / mine.high
    error = math.hypot(mine.relative_error, other.relative_error)
    return worst > best * (1.0 + max(config.min_margin, config.margin_z * error))


def may_win(config: PolicyConfig, state: PolicyState, batch_size: int, current: bool) -> bool:
    """Whether the other state, its step at the bottom of its bracket, beats ``current``'s
    predicted goodput at ``batch_size`` by ``min_margin``, where ``batch_size`` lies above the
    largest bucket that state was measured in (there the bottom is that bucket's step: a
    larger batch never steps faster); below one, the bound (per request, never dearer) is
    too loose to tell: with host noise it sent simulated waves of 4 requests probing the off
    state at half its step at 8. Where it cannot win, a wave arriving there is not worth
    probing it for (:mod:`.calibrated`, arrivals)."""
    found = _other_at_best(config, state, batch_size, current)
    if found is None:
        return False
    cal, stalls, _, best = found
    measured = cal.curve(not current, config.min_samples, stalls).points
    if not measured or bucket_of(batch_size) <= measured[-1].bucket:
        return False
    mine = predict(cal, current, batch_size, config.min_samples, stalls)
    if mine is None:
        return False
    return best > ((state.accept_mean or 1.0) if current else 1.0) / mine.seconds * (
        1.0 + config.min_margin
    )


def _other_at_best(
    config: PolicyConfig, state: PolicyState, batch_size: int, current: bool
) -> tuple[Calibration, int | None, Bracket, float] | None:
    """The calibration, its stalls reading at ``batch_size``, the other state's bracket there
    and its goodput with its step at the bracket's bottom; None while either is unknown."""
    cal = state.calibration or Calibration()
    stalls = stalls_after(cal, batch_size, config.window_results)
    other = bracket(cal, not current, batch_size, config.min_samples, stalls)
    if other is None or state.accept_mean is None:
        return None
    return cal, stalls, other, (1.0 if current else state.accept_mean) / other.low


def breakeven(config: PolicyConfig, cal: Calibration) -> tuple[float, float]:
    """The accept length at which speculation pays where it is cheapest, at one request, and
    the margin that opens the gate again: ``t_on(1) / t_off(1)`` as the model predicts them,
    else (a state not measured well enough to tell) the configured prior and ``min_margin``."""
    on, off = steps_at(config, cal, 1)
    if on is not None and off is not None and off.seconds > 0:
        return on.seconds / off.seconds, margin_of(config, on, off)
    return config.breakeven_accept_length(config.steps_for(1)), config.min_margin


def near_breakeven(config: PolicyConfig, cal: Calibration, batch_size: int) -> bool:
    """Whether speculation's step at ``batch_size``, against the off state's, costs no more
    than at the breakeven (:func:`breakeven`, one request) by the switching margin, both
    measured in that batch size's bucket (one request's always is; False where either is not:
    held off, speculation is measured where it ran before, and extrapolated above that its
    step reads cheap). The acceptance gate asks whether the draft clears the breakeven: a
    draft that just clears it pays there and nowhere dearer, and a probe there is the
    cheapest (live, a probe at 2 requests that ran on into 128 cost its turn 13%; simulated,
    the poor draft's probes at 32-64 cost a level 5-7%)."""
    if bucket_of(batch_size) == bucket_of(1):  # the breakeven's own batch size
        return True
    on, off = steps_at(config, cal, batch_size)
    if on is None or off is None or off.seconds <= 0 or not (on.is_measured and off.is_measured):
        return False
    least, margin = breakeven(config, cal)
    return on.seconds / off.seconds <= least * (1.0 + margin)


def accepts_too_little(
    config: PolicyConfig, state: PolicyState, samples: int = 0, margin: bool = False
) -> bool:
    """The acceptance gate: the mean accept length, over ``samples`` verifies at least
    (default ``min_samples``), below :func:`breakeven` (with ``margin``: not above it by the
    margin, which a probe must clear to open the gate again: hysteresis)."""
    needed = samples or config.min_samples
    if not config.acceptance_gate or state.accept_mean is None or state.accept_samples < needed:
        return False
    level, above = breakeven(config, state.calibration or Calibration())
    return state.accept_mean < level * (1.0 + above if margin else 1.0)


__all__ = [
    "accept_with",
    "accepts_too_little",
    "better_state",
    "breakeven",
    "goodputs",
    "is_settled",
    "margin_of",
    "may_win",
    "steps_at",
]
