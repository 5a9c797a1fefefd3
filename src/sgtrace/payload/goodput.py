"""What the calibrated policy compares (:mod:`.calibrated`): each state's predicted goodput at a
batch size, per request, and the margin by which one must beat the other to switch.

Per request, speculation yields ``A`` tokens a step (the mean accept length, bonus token
included) in ``t_on(bs)`` seconds, the off state one token in ``t_off(bs)``
(:func:`~.calibration.predict`); the margin is ``max(min_margin, margin_z * se)`` with ``se``
the two predictions' combined relative standard error.
"""

from __future__ import annotations

import math

from .calibration import Calibration, Prediction, predict, stalls_after
from .policy import PolicyConfig
from .rules import PolicyState


def goodputs(
    config: PolicyConfig, state: PolicyState, batch_size: int
) -> tuple[float, float, float] | None:
    """Predicted tokens per request-second on and off at ``batch_size``, and the margin a
    switch needs; None while either state or the accept length is unknown."""
    cal = state.calibration or Calibration()
    accept = state.accept_mean
    if accept is None:
        return None
    stalls = stalls_after(cal, batch_size, config.window_results)
    on = predict(cal, True, batch_size, config.min_samples, stalls)
    off = predict(cal, False, batch_size, config.min_samples, stalls)
    if on is None or off is None:
        return None
    return accept / on.seconds, 1.0 / off.seconds, margin_of(config, on, off)


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


__all__ = ["better_state", "goodputs", "margin_of"]
