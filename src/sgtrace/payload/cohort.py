"""Cohorts: requests of one length that arrive together, and what speculation costs them.

A cohort is a set of requests received between two decode results that all ask for the same
number of new tokens and ignore the end of sequence (``ignore_eos``: they finish by length,
as ``../shared/live-sglang/load.py`` and most benchmarks send them). The scheduler prefills
them before the next decode step, so they decode in step from then on.

Without speculation every request makes one token a step and the cohort finishes in one step;
its clients' next requests (a closed loop) arrive together and take one prefill batch, and
the cohort forms again. Speculating, each request makes ``1..S+1`` tokens a step at random,
so the cohort finishes over several steps, each finishing group's successors take a prefill
batch of their own, and every such batch stalls decoding (a decode step's period does not
show it: :mod:`.calibration` counts the stalls only at the share a window measured, and the
off state, measured on the cohort once it is out of step, shows as many). Live, load.py's
level of 32 requests lost 8-11% speculating where the decode steps alone said speculation
pays 14% (``bench/results/live/sweep/call30``, ``bench/results/policy_stream.md``).

:func:`round_of` puts one round of a cohort in both states: ``L / A`` speculative steps and
the stalls speculation measured at that batch size, against ``L`` plain steps and one stall.
The policy decides on it where the round's measurements are fresh (``since``), so a load
that changed is measured again before a cohort is served by it.

>>> from .calibration import fold
>>> cal = Calibration()
>>> for step in range(40):  # speculating at 32: 12.8 ms a step, a prefill (6 ms) every other
...     stalled = step % 2 == 1
...     period, stall = (None, 0.0188) if stalled else (0.0128, None)
...     cal = fold(cal, step, 32, True, period, 16, interrupted=stall)
>>> for step in range(40, 60):  # and not: 5.9 ms a step
...     cal = fold(cal, step, 32, False, 0.0059, 16)
>>> found = round_of(PolicyConfig(), cal, 2.5, Cohort(32, 64), 32, since=0)
>>> round(found.spec * 1e3), round(found.plain * 1e3)  # 25.6 steps, about 12 stalls; 64 steps, 1
(402, 384)
"""

from __future__ import annotations

from dataclasses import dataclass

from .calibration import Calibration, bucket_of, predict
from .policy import PolicyConfig

MIN_COHORT = 4  # fewer requests in step lose at most a few stalls a round: not worth asking


@dataclass(frozen=True)
class Cohort:
    """``size`` requests of ``tokens`` new tokens each, received between two decode results."""

    size: int
    tokens: int


def largest(counts: dict[int, int]) -> Cohort:
    """The largest cohort among ``counts`` (requests by their length), or an empty one (size
    0) where it holds fewer than :data:`MIN_COHORT` requests."""
    size, tokens = max(((n, t) for t, n in counts.items()), default=(0, 0))
    return Cohort(size, tokens) if size >= MIN_COHORT else Cohort(0, 0)


@dataclass(frozen=True)
class Round:
    """A cohort's round in seconds, speculating (``spec``) and not (``plain``)."""

    spec: float
    plain: float


def round_of(
    config: PolicyConfig,
    cal: Calibration,
    accept: float | None,
    cohort: Cohort,
    batch_size: int,
    since: int,
) -> Round | None:
    """A round of ``cohort`` in a batch of ``batch_size`` in both states, or None where the
    model cannot tell: no cohort (fewer than :data:`MIN_COHORT`), no accept length, a state's
    step unknown, or speculation's window at this batch size without ``window_results``
    results, or none since step ``since`` (stale: measure again first).

    The stalls of a speculating round are the share of speculation's results there that a
    prefill interrupted, times the round's steps: measured, not modelled, since it tells a
    closed loop (a prefill most steps, the successors of each group finishing out of step)
    from waves (nothing arrives while a cohort finishes; its stragglers cost no prefill)."""
    if cohort.size < MIN_COHORT:
        return None
    on = predict(cal, True, batch_size, config.min_samples)
    off = predict(cal, False, batch_size, config.min_samples)
    window = cal.window_of(True, batch_size)
    if accept is None or on is None or off is None or window is None or window.last_step < since:
        return None
    stall_on = stall_seconds(cal, True, batch_size)
    if len(window.kinds) < config.window_results or stall_on is None:
        return None
    stall_off = stall_seconds(cal, False, batch_size)
    steps_on = cohort.tokens / accept
    groups = min(float(cohort.size), max(1.0, window.interrupted * steps_on))
    spec = steps_on * on.seconds + groups * stall_on
    plain = cohort.tokens * off.seconds + (stall_on if stall_off is None else stall_off)
    return Round(spec, plain)


def stall_seconds(cal: Calibration, spec_on: bool, batch_size: int) -> float | None:
    """What a prefill batch adds to a result of ``spec_on``'s state: the stalled periods' center
    less the consecutive ones' in the measured bucket nearest ``batch_size`` (None: none)."""
    found = [w for w in cal.windows if w.spec_on == spec_on and w.stalls and w.periods]
    if not found:
        return None
    near = min(found, key=lambda w: abs(w.bucket.bit_length() - bucket_of(batch_size).bit_length()))
    return max(0.0, near.busy - near.center)


__all__ = [
    "MIN_COHORT",
    "Cohort",
    "round_of",
    "Round",
    "largest",
    "stall_seconds",
]
