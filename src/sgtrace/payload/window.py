"""A window of the calibrated policy's model: the latest step periods of one state in one
batch-size bucket, and their robust statistics (:mod:`.calibration` keeps the windows).

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

_SE_OF_MEDIAN = 1.2533 * 1.4826  # standard error of a median, per MAD / sqrt(n)


def median(values: tuple[float, ...] | list[float]) -> float:
    """The median of ``values`` (the mean of the middle two of an even count)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@dataclass(frozen=True)
class Window:
    """The latest periods of one state in one bucket, and their statistics.

    ``center`` (interquartile mean) and ``mad`` of ``periods``; ``size``: the median batch size
    of those results;
    ``last_step``: the step of the latest one.
    """

    spec_on: bool
    bucket: int
    periods: tuple[float, ...]
    sizes: tuple[int, ...]
    last_step: int
    center: float
    mad: float
    size: float

    @property
    def count(self) -> int:
        return len(self.periods)

    @property
    def relative_error(self) -> float:
        """The standard error of the center, relative to it."""
        if self.center <= 0:
            return 0.0
        return _SE_OF_MEDIAN * self.mad / math.sqrt(self.count) / self.center

    def with_period(self, step: int, batch_size: int, period: float, limit: int) -> Window:
        periods = (*self.periods, period)[-limit:]
        sizes = (*self.sizes, batch_size)[-limit:]
        return window_of_periods(self.spec_on, self.bucket, periods, sizes, step)


def window_of_periods(
    spec_on: bool, bucket: int, periods: tuple[float, ...], sizes: tuple[int, ...], step: int
) -> Window:
    """The window of ``periods`` and their batch ``sizes``, the latest at ``step``."""
    ordered = sorted(periods)
    cut = len(ordered) // 4
    kept = ordered[cut : len(ordered) - cut]
    center = math.fsum(kept) / len(kept)  # the interquartile mean
    mad = median([abs(p - center) for p in ordered])
    return Window(spec_on, bucket, periods, sizes, step, center, mad, float(median(sizes)))
