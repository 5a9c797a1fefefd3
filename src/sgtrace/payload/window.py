"""A window of the calibrated policy's model: the latest periods between decode results of one
state in one batch-size bucket, consecutive ones and those interrupted by another batch (a
prefill), how often each came, and their robust statistics (:mod:`.calibration` keeps the
windows); and what is no result's cost at all (:func:`is_idle`).

Robust against the host: a window's statistic, its ``center``, is the interquartile mean (the
mean of the middle half of its periods: a host hiccup stretches a step, and with the overlap
scheduler shortens the next, which then finds the GPU done; the trimmed mean drops a quarter at
each end and averages the rest, so it moves little when up to a quarter of the periods are
disturbed either way, and, averaging, less with noise than the median). Its standard error is
taken as the median's, ``1.2533 * 1.4826 * MAD / sqrt(n)`` (MAD: the median absolute deviation;
the interquartile mean's is no larger for a normal bulk).

>>> window = window_of_periods(True, 4, (0.010, 0.010, 0.040, 0.010), (3, 4, 4, 4), step=7)
>>> (window.center, window.mad, window.size)  # the stalled step (40 ms) moves neither
(0.01, 0.0, 4.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

_SE_OF_MEDIAN = 1.2533 * 1.4826  # standard error of a median, per MAD / sqrt(n)
IDLE_FACTOR = 4.0  # a period this many times its window's center is no decode step
KINDS_FACTOR = 4  # the kinds of four windows' worth of results: the share of interruptions


def median(values: tuple[float, ...] | list[float]) -> float:
    """The median of ``values`` (the mean of the middle two of an even count)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@dataclass(frozen=True)
class Window:
    """The latest results of one state in one bucket, and their statistics.

    ``periods``: the latest periods of results consecutive with the previous one, ``center``
    (interquartile mean) and ``mad`` of them; ``stalls``: the latest interrupted periods (another
    batch, a prefill, ran in between: the step and that batch), ``busy`` and ``busy_mad`` of
    them; ``kinds``: whether each of the latest results counted was interrupted (a longer
    window: interruptions come one in many results at low load); ``sizes``: the batch sizes of
    the latest results counted, ``size`` their median; ``last_step``: the step of the latest.

    What a result of this state costs here, ``seconds``, is the mean of the two kinds of period
    weighted by how often each came (``interrupted``): under load the prefill batches of the
    requests that arrive interleave with the decode steps, and a state that makes more tokens a
    step finishes more requests a step but shares a prefill batch among them; a decode step's
    period alone misses that. ``relative_error``: its standard error, relative to it (each
    center's, and the share's, binomial).
    """

    spec_on: bool
    bucket: int
    periods: tuple[float, ...]
    sizes: tuple[int, ...]
    last_step: int
    center: float
    mad: float
    size: float
    stalls: tuple[float, ...] = ()
    kinds: tuple[bool, ...] = ()
    busy: float = 0.0
    busy_mad: float = 0.0

    @property
    def count(self) -> int:
        """Periods of either kind in the window."""
        return len(self.periods) + len(self.stalls)

    @property
    def interrupted(self) -> float:
        """The share of the latest results counted that were interrupted."""
        return sum(self.kinds) / len(self.kinds) if self.kinds else 0.0

    @cached_property
    def seconds(self) -> float:
        """A result's seconds in this state and bucket, interruptions included."""
        if not self.stalls:
            return self.center
        if not self.periods:
            return self.busy
        share = self.interrupted
        return (1.0 - share) * self.center + share * self.busy

    @cached_property
    def relative_error(self) -> float:
        """The standard error of :attr:`seconds`, relative to it."""
        if self.seconds <= 0:
            return 0.0
        share, n_stalls, n_periods = self.interrupted, len(self.stalls), len(self.periods)
        clean = _SE_OF_MEDIAN * self.mad / math.sqrt(n_periods) if n_periods else 0.0
        stalled = _SE_OF_MEDIAN * self.busy_mad / math.sqrt(n_stalls) if n_stalls else 0.0
        variance = ((1.0 - share) * clean) ** 2 + (share * stalled) ** 2
        if n_periods and n_stalls:  # the share itself is a sample of len(kinds) results
            variance += (self.busy - self.center) ** 2 * share * (1.0 - share) / len(self.kinds)
        return math.sqrt(variance) / self.seconds

    @property
    def clean(self) -> float:
        """A result's seconds without the interruptions: a decode step (the stalls' center
        where no consecutive period came)."""
        return self.center if self.periods else self.busy

    @property
    def clean_error(self) -> float:
        """The standard error of :attr:`clean`, relative to it."""
        n, mad = (
            (len(self.periods), self.mad) if self.periods else (len(self.stalls), self.busy_mad)
        )
        return _SE_OF_MEDIAN * mad / math.sqrt(n) / self.clean if n and self.clean > 0 else 0.0

    def cost(self, stalls_after: int | None) -> tuple[float, float]:
        """A result's seconds and their relative error: with the interruptions where the share
        of them rests on ``stalls_after`` results or more, else without (:attr:`clean`)."""
        if stalls_after is not None and len(self.kinds) >= stalls_after:
            return self.seconds, self.relative_error
        return self.clean, self.clean_error

    def with_period(
        self, step: int, batch_size: int, period: float, limit: int, interrupted: bool = False
    ) -> Window:
        """This window with one more result: a consecutive ``period`` or, ``interrupted``, a
        stall; the latest ``limit`` of each kind kept, and ``KINDS_FACTOR * limit`` kinds."""
        periods, stalls = self.periods, self.stalls
        if interrupted:
            stalls = (*stalls, period)[-limit:]
        else:
            periods = (*periods, period)[-limit:]
        sizes = (*self.sizes, batch_size)[-limit:]
        kinds = (*self.kinds, interrupted)[-KINDS_FACTOR * limit :]
        return window_of_periods(self.spec_on, self.bucket, periods, sizes, step, stalls, kinds)


def _center(periods: tuple[float, ...]) -> tuple[float, float]:
    """The interquartile mean of ``periods`` and their median absolute deviation from it."""
    if not periods:
        return 0.0, 0.0
    ordered = sorted(periods)
    cut = len(ordered) // 4
    kept = ordered[cut : len(ordered) - cut]
    center = math.fsum(kept) / len(kept)  # the interquartile mean
    return center, median([abs(p - center) for p in ordered])


def window_of_periods(
    spec_on: bool,
    bucket: int,
    periods: tuple[float, ...],
    sizes: tuple[int, ...],
    step: int,
    stalls: tuple[float, ...] = (),
    kinds: tuple[bool, ...] | None = None,
) -> Window:
    """The window of consecutive ``periods``, interrupted ones (``stalls``) and their batch
    ``sizes``, the latest at ``step``; ``kinds`` (default: the stalls after the periods)."""
    center, mad = _center(periods)
    busy, busy_mad = _center(stalls)
    if kinds is None:
        kinds = (False,) * len(periods) + (True,) * len(stalls)
    size = float(median(sizes))
    return Window(
        spec_on, bucket, periods, sizes, step, center, mad, size, stalls, kinds, busy, busy_mad
    )


def is_idle(
    windows: tuple[Window, ...],
    ran_on: bool,
    found: Window | None,
    batch_size: int,
    period: float,
    interrupted: bool,
) -> bool:
    """Whether ``period`` is an idle server or a stalled host rather than a result's cost: a
    consecutive one over :data:`IDLE_FACTOR` times its window's center; an interrupted one over
    that many times its window's stalls, or, with fewer than two of those, twice its center (a
    prefill as long as a step), or, in a bucket not measured yet, than what the state's buckets
    of half the batch size or more allow at this one (a step costs no more per request in a
    larger batch; farther buckets bound it too loosely). An interrupted period with nothing to
    compare against is not counted: the first requests after idle time come as one."""
    if not interrupted:
        return found is not None and len(found.periods) >= 2 and period > IDLE_FACTOR * found.center
    if found is not None and len(found.stalls) >= 2:
        return period > IDLE_FACTOR * found.busy
    if found is not None and len(found.periods) >= 2:
        return period > IDLE_FACTOR * 2.0 * found.center
    bounds = [
        w.seconds * max(1.0, batch_size / w.size)
        for w in windows
        if w.spec_on == ran_on and w.count >= 2 and batch_size <= 2 * w.size
    ]
    return not bounds or period > IDLE_FACTOR * 2.0 * max(bounds)
