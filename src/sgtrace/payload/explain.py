"""The hook's log of why it decided: what the policy compared, where it matters.

A toggle line (``sgtrace-hook toggle ... reason=...``) says what the hook did; the line here
says why, in the numbers the policy compared. With ``log_measurements`` on (the sweeps' hooks),
the hook logs one at INFO where a probe ends, where requests arriving are held in a state
(:mod:`.wave`, :mod:`.cohort`), where the hook switches and where the measured policy
completes a measurement (:func:`~.measured.measurement_line`), so a live run's decisions
can be read from its server log without a trace. For the calibrated policy:

    sgtrace-hook estimate step=1403 rank=0 bucket=16 batch_size=16 why=probe-ended
    on=7.70ms±1.2%* off=3.90ms±0.8%* accept=2.50 goodput_on=324.7 goodput_off=256.4 margin=3.0%

``on``/``off``: each state's predicted step at the batch size (:func:`~.goodput.steps_at`,
interruptions included) with its relative standard error, ``*`` where the bucket's own periods
hold it and ``~`` where the model reads it off the other buckets; ``-`` where it cannot tell;
``goodput_on``/``goodput_off``: tokens per request-second, ``accept / t_on`` and
``1 / t_off``; ``margin``: what a switch needs (:func:`~.goodput.margin_of`). Where a wave's
tail first keeps a switch on (``why=tail``, :mod:`.tail`), the line adds what is left of the
wave where the switch would take effect: ``tail_left`` requests, ``tail_on``/``tail_off`` the
seconds until the last ends in each state, ``switch`` the switch's cost with the margin. Live, call 49's probe of the off state among
waves of 16 ended off and the hook stayed off for eight waves, 20% below EAGLE-3 a turn, and
its log could not say why.

>>> from .policy import PolicyConfig
>>> from .rules import PolicyState
>>> estimate_line(PolicyConfig(), PolicyState(), 7, 0, 16, "switch")
'sgtrace-hook estimate step=7 rank=0 bucket=16 batch_size=16 why=switch on=- off=- accept=-'
"""

from __future__ import annotations

from .calibration import Calibration, Prediction, bucket_of
from .goodput import margin_of, steps_at
from .measured import measurement_line
from .policy import PolicyConfig
from .rules import PolicyState
from .tail import tail_line


def why_logged(
    before: PolicyState, after: PolicyState, changed: bool, tail: bool = False
) -> str | None:
    """Why the decision that took ``before`` to ``after`` is worth a line, or None: the
    measured policy completed a measurement, a calibrated probe ended, a wave or cohort of
    requests arriving is held in a state while it decodes (either switching or not), the
    state switched otherwise, or (``tail``) a wave's tail first kept a switch (:mod:`.tail`)."""
    if after.rates is not before.rates:
        return "measured"
    was, now = before.calibration, after.calibration
    if was is not None and was.probe is not None and (now is None or now.probe is None):
        return "probe-ended"  # its verdict, a switch or not
    if now is not None and now.cohort_until > (0 if was is None else was.cohort_until):
        return "held"  # a wave or a cohort held in a state while it decodes, a switch or not
    if changed:
        return "switch"
    return "tail" if tail else None


def decision_line(
    config: PolicyConfig, before: PolicyState, after: PolicyState, step: int, rank: int,
    batch_size: int, changed: bool, tail: bool = False,
) -> str | None:  # fmt: skip
    """The line for a decision (:func:`why_logged`), or None; a tail's with what is left of
    the wave and the switch's cost (:func:`~.tail.tail_line`)."""
    why = why_logged(before, after, changed, tail)
    if why is None:
        return None
    if before.rates or after.rates:  # the measured policy: its completed measurements only
        return measurement_line(after, step, rank, batch_size) if why == "measured" else None
    line = estimate_line(config, after, step, rank, batch_size, why)
    return f"{line} {tail_line(config, after, batch_size, step)}" if why == "tail" else line


def estimate_line(
    config: PolicyConfig, state: PolicyState, step: int, rank: int, batch_size: int, why: str
) -> str:
    """The calibrated policy's comparison at ``batch_size`` (the module docstring)."""
    on, off = steps_at(config, state.calibration or Calibration(), batch_size)
    accept = state.accept_mean
    head = (
        f"sgtrace-hook estimate step={step} rank={rank} bucket={bucket_of(batch_size)} "
        f"batch_size={batch_size} why={why} on={_step(on)} off={_step(off)} "
        f"accept={'-' if accept is None else f'{accept:.2f}'}"
    )
    if on is None or off is None or accept is None:
        return head
    return (
        f"{head} goodput_on={accept / on.seconds:.1f} goodput_off={1.0 / off.seconds:.1f} "
        f"margin={margin_of(config, on, off):.1%}"
    )


def _step(found: Prediction | None) -> str:
    if found is None:
        return "-"
    where = "*" if found.is_measured else "~"
    return f"{found.seconds * 1e3:.2f}ms±{found.relative_error:.1%}{where}"


__all__ = ["decision_line", "estimate_line", "why_logged"]
