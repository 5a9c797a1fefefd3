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

A step's cost, :attr:`Window.steady`, is the center, or lower where one of the window's latest
:data:`FLOOR_BLOCKS` earlier blocks of a window's worth of consecutive periods, at its batch
size or more, ran :data:`SLOWED` times faster or more: a slowdown that lasts a turn (live on an
H200, a speculating server's turns ran 1.5-1.9 times slower one in seven) then does not decide
a comparison with the other state, measured in another turn.

>>> window = window_of_periods(True, 4, (0.010, 0.010, 0.040, 0.010), (3, 4, 4, 4), step=7)
>>> (window.center, window.mad, window.size)  # the stalled step (40 ms) moves neither
(0.01, 0.0, 4.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .frozen import build, once

_SE_OF_MEDIAN = 1.2533 * 1.4826  # standard error of a median, per MAD / sqrt(n)
IDLE_FACTOR = 4.0  # a period this many times its window's center is no decode step
FLOOR_BLOCKS = 6  # earlier blocks of a window's worth of periods a window remembers (steady)
SLOWED = 1.1  # a window's center this much over an earlier block's is a slowdown (steady)
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
    period_sizes: tuple[int, ...] = ()  # the batch size of each consecutive period
    slope: float = 0.0  # seconds a request more adds to a step within the bucket (_slope)
    floors: tuple[tuple[float, float], ...] = ()  # (center, size) of the latest blocks (steady)
    fresh: int = 0  # consecutive periods since the latest block closed

    @once
    def steady(self) -> float:
        """A step's seconds here: the :attr:`center`, or an earlier block's where one of the
        latest :data:`FLOOR_BLOCKS` blocks of a window's worth of consecutive periods, at this
        median batch size or more, ran :data:`SLOWED` times faster or more (the fastest of
        them; within that, noise: the lowest of seven blocks would read a state that ran
        long 2% cheaper than one just probed). The host and the GPU only ever slow a step: live
        (call 49, an H200), a speculating server ran a whole turn of 16 requests 1.5-1.9 times
        slower, one turn in seven, no speculation rarely; a state measured in such a turn and
        the other in the next would be compared across the slowdown (simulated, the fair
        draft's start-up measurements at one request, one turn in seven 1.8 times slower: the
        acceptance gate shut at the breakeven that turn inflated, and stayed shut). A block at
        a smaller batch size is no bound (its step is cheaper); one at a larger size bounds
        from above. A lasting slowdown (longer contexts) shows after that many blocks."""
        found = [center for center, size in self.floors if size >= self.size]
        least = min(found, default=self.center)
        return least if self.center > SLOWED * least else self.center

    @property
    def count(self) -> int:
        """Periods of either kind in the window."""
        return len(self.periods) + len(self.stalls)

    @property
    def interrupted(self) -> float:
        """The share of the latest results counted that were interrupted."""
        return sum(self.kinds) / len(self.kinds) if self.kinds else 0.0

    @once
    def seconds(self) -> float:
        """A result's seconds in this state and bucket, interruptions included."""
        if not self.stalls:
            return self.steady
        if not self.periods:
            return self.busy
        share = self.interrupted
        return (1.0 - share) * self.steady + share * self.busy

    @once
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

    @once
    def clean(self) -> float:
        """A result's seconds without the interruptions: a decode step (the stalls' center
        where no consecutive period came)."""
        return self.steady if self.periods else self.busy

    @once
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
        periods, stalls, period_sizes = self.periods, self.stalls, self.period_sizes
        fresh = self.fresh
        if interrupted:
            stalls = (*stalls, period)[-limit:]
        else:
            periods = (*periods, period)[-limit:]
            period_sizes = (*period_sizes, batch_size)[-limit:]
            fresh += 1
        sizes = (*self.sizes, batch_size)[-limit:]
        kinds = (*self.kinds, interrupted)[-KINDS_FACTOR * limit :]
        return window_of_periods(
            self.spec_on, self.bucket, periods, sizes, step, stalls, kinds, period_sizes,
            self.floors, fresh, limit,
        )  # fmt: skip


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
    period_sizes: tuple[int, ...] = (),
    floors: tuple[tuple[float, float], ...] = (),
    fresh: int = 0,
    block: int = 0,
) -> Window:
    """The window of consecutive ``periods``, interrupted ones (``stalls``) and their batch
    ``sizes``, the latest at ``step``; ``kinds`` (default: the stalls after the periods);
    ``period_sizes``: each period's batch size, where known (then the periods are read along
    the bucket's own :func:`_slope`, each moved to the window's median size); ``floors``
    and ``fresh``: the earlier blocks and the periods since (:attr:`Window.steady`), a block
    closing where ``fresh`` reaches ``block`` (0: never)."""
    size = float(median(sizes))
    slope = _slope(periods, period_sizes, bucket)
    if slope > 0.0:
        periods_at_size = tuple(
            p - slope * (n - size) for p, n in zip(periods, period_sizes, strict=True)
        )
        center, mad = _center(periods_at_size)
    else:
        center, mad = _center(periods)
    busy, busy_mad = _center(stalls)
    if kinds is None:
        kinds = (False,) * len(periods) + (True,) * len(stalls)
    if block and fresh >= block:  # a block of consecutive periods closed: keep its center
        floors, fresh = (*floors, (center, size))[-FLOOR_BLOCKS:], 0
    return build(  # not Window(...): its __init__ costs a decode step 2 us more (frozen.py)
        Window, spec_on=spec_on, bucket=bucket, periods=periods, sizes=sizes, last_step=step,
        center=center, mad=mad, size=size, stalls=stalls, kinds=kinds, busy=busy,
        busy_mad=busy_mad, period_sizes=period_sizes, slope=slope, floors=floors, fresh=fresh,
    )  # fmt: skip


def _slope(periods: tuple[float, ...], sizes: tuple[int, ...], bucket: int) -> float:
    """How much a request more adds to a step within one bucket, from the window's own
    periods: the larger half's median period less the smaller half's, over their median sizes'
    gap; 0 where the sizes are not known for every period, or lie too close (a gap under an
    eighth of the bucket: noise over a gap of one request would read as a steep slope), or the
    larger half steps no slower (CUDA graphs pad a batch to the size they were captured at, so
    the step of 33 requests can be the step of 64).

    A wave's tail spends its steps from the bucket's top down to its bottom: 7 periods at 64
    requests (22.8 ms) and 9 at 33-45 (14.7-17.8 ms) have an interquartile mean of 19.3 ms and
    a median size of 44.5, a point of a curve that then predicts 26 ms at 64 (a simulated
    wave, LABBOOK "Thirteenth session"). Read along this slope they say 17.6 ms at 44.5.

    >>> round(_slope((0.010, 0.011, 0.018, 0.019), (32, 34, 60, 64), 64), 6)  # 8 ms over 29
    0.000276
    >>> _slope((0.010, 0.011, 0.018, 0.019), (60, 61, 62, 64), 64)  # too close to tell
    0.0
    """
    least = max(1.0, bucket / 8)
    if len(periods) != len(sizes) or len(periods) < 4 or max(sizes) - min(sizes) < least:
        return 0.0  # the common case, a batch that holds its size, at the cost of two passes
    pairs = sorted(zip(sizes, periods, strict=True))
    half = len(pairs) // 2
    low, high = pairs[:half], pairs[len(pairs) - half :]
    gap = median([n for n, _ in high]) - median([n for n, _ in low])
    if gap < least:
        return 0.0
    return max(0.0, (median([p for _, p in high]) - median([p for _, p in low])) / gap)


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


def windows_with_period(
    windows: tuple[Window, ...],
    step: int,
    bucket: int,
    batch_size: int,
    ran_on: bool,
    period: float,
    limit: int,
    interrupted: bool,
) -> tuple[Window, ...]:
    """``windows`` with ``period`` (``interrupted``: a stall) in the window of ``ran_on``'s
    state and ``bucket`` (``batch_size``'s), the latest ``limit`` kept, or in a new window;
    the same windows when it is no decode step (:func:`is_idle`)."""
    for i, found in enumerate(windows):
        if found.spec_on == ran_on and found.bucket == bucket:
            if is_idle(windows, ran_on, found, batch_size, period, interrupted):
                return windows
            updated = found.with_period(step, batch_size, period, limit, interrupted)
            return (*windows[:i], updated, *windows[i + 1 :])
    if interrupted and is_idle(windows, ran_on, None, batch_size, period, interrupted):
        return windows
    stalls, periods = ((period,), ()) if interrupted else ((), (period,))
    added = window_of_periods(ran_on, bucket, periods, (batch_size,), step, stalls)
    return tuple(sorted((*windows, added), key=lambda w: (w.spec_on, w.bucket)))


def theil_sen_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The median of the pairwise slopes, clipped at zero (a step never gets cheaper with more
    requests).

    >>> theil_sen_slope([1.0, 2.0, 4.0, 8.0, 16.0], [5.0, 6.0, 8.0, 12.0, 100.0])  # one bad
    1.0
    """
    slopes = [
        (ys[j] - ys[i]) / (xs[j] - xs[i])
        for i in range(len(xs))
        for j in range(i + 1, len(xs))
        if xs[j] > xs[i]
    ]
    return max(0.0, median(slopes)) if slopes else 0.0
