"""The calibrated policy's model of itself: what a result of each state costs by batch size.

The server measures its own results: each decode result comes with the seconds since the
previous one on the deciding rank, ``step_period_s`` when the two batches were consecutive (one
decode step) and ``interrupted_period_s`` when other batches ran in between (the prefill of the
requests that arrived: under load they interleave with the decode steps). :func:`fold` keeps, per
state (speculation on, or the off state: a plain decode) and batch-size bucket (the next power of
two), a :class:`~.window.Window` of the latest periods of both kinds and of how often each came;
:func:`predict` turns the windows of a state into what one of its results costs at any batch size.

Why the interruptions count: a state that makes more tokens a step finishes more requests a step,
and the prefills of their successors share a batch; a decode step's period alone shows
speculation only what its step costs, and under a closed loop of clients at a large batch that
misses several percent (``bench/results/policy_stream.md``). They are read only where both
states' windows at the batch size measured their share over a window's worth of results
(:func:`stalls_after`): the first of a wave among ten results would tilt a comparison the
consecutive periods decide well.

Robust against the host: a window's statistics are interquartile means (:mod:`.window` says
why). Left out: the first result of a run of a state (it straddles the switch, see
:func:`fold`), and idle time (:func:`~.window.is_idle`: a period far over what its window or a
neighbour allows).

Across batch sizes the step time is close to ``a + b * batch_size`` (weights are read once per
step, attention and the verify's extra tokens grow with the batch): :func:`predict` follows a
measured bucket's own slope inside it (``Window.slope``), else interpolates between the
measured buckets' (median batch size, center period) points, made non-decreasing,
and extrapolates beyond them with the Theil-Sen slope of all points (the median of the pairwise
slopes, robust to one bad bucket), never below zero, nor above the largest bucket below the
slope between the two largest (:func:`_convex_slope`; a median over a flat part is too low).
What a decision reads of the windows, a state's :class:`Curve` and its predictions, is made once
per calibration (which never changes) and kept by :func:`fold` for the state whose windows it
leaves alone: the policy predicts several times a step.

>>> cal = Calibration()
>>> for step in range(12):
...     cal = fold(cal, step, batch_size=4, ran_on=False, period=0.005, window=16)
>>> window = cal.window_of(False, 4)
>>> (window.count, window.center)
(11, 0.005)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from itertools import accumulate
from typing import Any

from .frozen import build, once
from .window import Window, theil_sen_slope, windows_with_period

_TUPLES = ("periods", "sizes", "stalls", "kinds", "period_sizes")  # JSON makes them lists


def _floors(window: Mapping[str, Any]) -> tuple[tuple[float, float], ...]:
    """A window's ``floors`` read from JSON (lists of lists)."""
    return tuple((center, size) for center, size in window.get("floors", ()))


def bucket_of(batch_size: int) -> int:
    """The bucket of a batch size: the next power of two (1, 2, 4, 8, ...)."""
    return 1 << (batch_size - 1).bit_length() if batch_size > 1 else 1


@dataclass(frozen=True)
class Calibration:
    """Every window, and the state and length of the current run of results: ``last_ran_on``,
    which state produced the previous result (None before any); ``run``, results in a row
    produced by that state, the latest included."""

    windows: tuple[Window, ...] = ()
    last_ran_on: bool | None = None
    run: int = 0
    probe: Probe | None = None
    failures: tuple[Failures, ...] = ()
    probe_free_at: int = 0  # no probe of another state before this step
    gate_free_at: int = 0  # no acceptance probe before this step
    recent: tuple[int, ...] = ()  # the batch sizes of the latest results (a dwell's worth)
    cohort_until: int = 0  # a cohort or wave decodes in ``cohort_on``'s state until this step
    cohort_on: bool = False

    def failures_at(self, batch_size: int) -> int:
        """Probes of ``batch_size``'s bucket lost in a row."""
        bucket = bucket_of(batch_size)
        return next((f.count for f in self.failures if f.bucket == bucket), 0)

    def with_failures(self, batch_size: int, count: int) -> Calibration:
        bucket = bucket_of(batch_size)
        kept = [f for f in self.failures if f.bucket != bucket]
        return replace(self, failures=tuple(sorted([*kept, Failures(bucket, count)])))

    def window_of(self, spec_on: bool, batch_size: int) -> Window | None:
        return self._made.windows.get((spec_on, bucket_of(batch_size)))

    def curve(self, spec_on: bool, min_samples: int, stalls_after: int | None = None) -> Curve:
        """The buckets of ``spec_on``'s state that hold ``min_samples`` periods, as
        :func:`predict` and :func:`bracket` read them (``stalls_after``: see
        :meth:`Window.cost`); made once per calibration, state and reading (a decision predicts
        several times; a calibration never changes)."""
        key = (spec_on, min_samples, stalls_after)
        found = self._made.curves.get(key)
        if found is None:
            found = self._made.curves[key] = Curve(self.windows, spec_on, min_samples, stalls_after)
        return found

    def steps_at(
        self, batch_size: int, min_samples: int, results: int
    ) -> tuple[Prediction | None, Prediction | None]:
        """Both states' steps at ``batch_size`` (:func:`predict`), the interruptions read where
        both know their share from ``results`` results (:func:`stalls_after`); made once per
        calibration and batch size (a decision compares the states there several times)."""
        key = (batch_size, min_samples, results)
        found = self._made.steps.get(key)
        if found is None:
            stalls = stalls_after(self, batch_size, results)
            on = predict(self, True, batch_size, min_samples, stalls)
            found = (on, predict(self, False, batch_size, min_samples, stalls))
            self._made.steps[key] = found
        return found

    @once
    def _made(self) -> Readings:
        return Readings(self.windows)  # not a field: neither compared nor in to_dict

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibration:
        windows = tuple(
            Window(**{**w, **{k: tuple(w[k]) for k in _TUPLES if k in w}, "floors": _floors(w)})
            for w in data["windows"]
        )
        probe = None if data["probe"] is None else Probe(**data["probe"])
        failures = tuple(Failures(**f) for f in data["failures"])
        free = (data["probe_free_at"], data["gate_free_at"])
        recent, until = tuple(data.get("recent", ())), data.get("cohort_until", 0)
        held = (until, data.get("cohort_on", False))
        return cls(windows, data["last_ran_on"], data["run"], probe, failures, *free, recent, *held)


@dataclass(frozen=True)
class Probe:
    """A probe in progress: the state it runs (``spec_on``), the step it was decided at, its
    periods counted since, whether it measures acceptance (``is_gate``) or a step time
    (explore; ``in_place``: a wave's own state, measured where it runs, no switch)."""

    spec_on: bool
    started: int
    samples: int = 0
    is_gate: bool = False
    batch_size: int = 0  # the batch it started at (0: not known), whose bucket it measures
    in_place: bool = False


@dataclass(frozen=True, order=True)
class Failures:
    """Probes of a bucket lost in a row (the state probed was not the better one)."""

    bucket: int
    count: int


def fold(
    cal: Calibration,
    step: int,
    batch_size: int,
    ran_on: bool,
    period: float | None,
    window: int,
    keep_recent: int = 0,
    interrupted: float | None = None,
) -> Calibration:
    """``cal`` with one result: the state that produced it, its batch size among the latest
    ``keep_recent`` (``Calibration.recent``; 0 leaves them), and, if it counts, its period:
    ``period`` when the result followed the previous one directly, ``interrupted`` when another
    batch (a prefill) ran in between.

    The first result of a run of a state is not counted: its period holds the end of the other
    state's step and the switch itself (``apply_runtime_state``). Results after it are one step
    of the state each (with the overlap scheduler a result is processed while the next batch
    runs, so consecutive results are one GPU step apart).
    """
    run = cal.run + 1 if cal.last_ran_on is ran_on else 1
    recent = (*cal.recent, batch_size)[-keep_recent:] if keep_recent else cal.recent
    windows = cal.windows
    seconds = period if period is not None else interrupted
    if seconds is not None and 0 < seconds < math.inf and batch_size >= 1 and run >= 2:
        is_stall = period is None
        where = (step, bucket_of(batch_size), batch_size, ran_on)
        windows = windows_with_period(windows, *where, seconds, window, is_stall)
    # built without __init__ (frozen.py): replace costs a twentieth of a decode step more
    folded = build(
        Calibration,
        windows=windows,
        last_ran_on=ran_on,
        run=run,
        probe=cal.probe,
        failures=cal.failures,
        probe_free_at=cal.probe_free_at,
        gate_free_at=cal.gate_free_at,
        recent=recent,
        cohort_until=cal.cohort_until,
        cohort_on=cal.cohort_on,
    )
    for key, curve in cal._made.curves.items():  # a state's curves, where its windows are the same
        if windows is cal.windows or key[0] != ran_on:
            folded._made.curves[key] = curve
    return folded


class Readings:
    """What decisions read of one calibration, made as they ask (a calibration never changes):
    its windows by state and bucket (the first of each), its :class:`Curve` of each state and
    reading, and both states' predicted steps by batch size (:meth:`Calibration.steps_at`)."""

    def __init__(self, windows: Sequence[Window]) -> None:
        self.windows = {(w.spec_on, w.bucket): w for w in reversed(windows)}
        self.curves: dict[tuple[bool, int, int | None], Curve] = {}
        self.steps: dict[tuple[int, int, int], tuple[Prediction | None, Prediction | None]] = {}


class Curve:
    """What :func:`predict` and :func:`bracket` read of one state's windows: those holding
    ``min_samples`` periods or more in bucket order (``points``), their median batch sizes
    (``xs``), their costs (``Window.cost``: ``costs`` and ``errors``), the costs made
    non-decreasing (``ys``), the index of each bucket, and the predictions made so far, by batch
    size. One per calibration, state and reading (:meth:`Calibration.curve`): the windows never
    change, so neither do the predictions (each step makes one: tuples of lists, twice as fast)."""

    def __init__(
        self, windows: Iterable[Window], spec_on: bool, min_samples: int, stalls_after: int | None
    ) -> None:
        points = [w for w in windows if w.spec_on == spec_on and w.count >= min_samples]
        found = [w.cost(stalls_after) for w in points]
        self.points, self.xs = tuple(points), tuple([w.size for w in points])
        self.costs, self.errors = tuple([c for c, _ in found]), tuple([e for _, e in found])
        self.ys = _non_decreasing(self.costs)
        self.slopes = tuple([w.slope for w in points])  # within each bucket (window.py)
        self.index = {w.bucket: i for i, w in enumerate(points)}
        self.predictions: dict[int, Prediction | None] = {}

    def at_own(self, i: int, x: float, costs: Sequence[float] | None = None) -> float:
        """Bucket ``i``'s cost (``ys`` or ``costs``) at ``x`` along its slope (not below ``i - 1``)."""
        ys = self.ys if costs is None else costs
        floor = ys[i - 1] if i > 0 and costs is None else 0.0
        return max(floor, ys[i] + self.slopes[i] * (x - self.xs[i]))


def stalls_after(cal: Calibration, batch_size: int, results: int) -> int | None:
    """``results``, where both states' windows in ``batch_size``'s bucket know the share of
    interrupted results from that many results or more, else None: both states are then read
    without the interruptions (a share from a few results, the first of a wave among ten, would
    tilt a comparison that the consecutive periods decide well)."""
    on, off = cal.window_of(True, batch_size), cal.window_of(False, batch_size)
    if on is None or off is None or min(len(on.kinds), len(off.kinds)) < results:
        return None
    return results


@dataclass(frozen=True)
class Prediction:
    """A state's predicted step time at a batch size, and its relative standard error;
    ``is_measured``: the batch size's own bucket holds enough periods."""

    seconds: float
    relative_error: float
    is_measured: bool


def predict(
    cal: Calibration,
    spec_on: bool,
    batch_size: int,
    min_samples: int,
    stalls_after: int | None = None,
) -> Prediction | None:
    """The seconds of a result of ``spec_on``'s state at ``batch_size`` (interruptions
    included where ``stalls_after`` results measured their share: :meth:`Window.cost`), or
    None when it cannot be told: no bucket of the state holds ``min_samples`` periods, or one
    does and it is another bucket (a single point gives no slope)."""
    curve = cal.curve(spec_on, min_samples, stalls_after)
    if batch_size not in curve.predictions:
        curve.predictions[batch_size] = _predict(curve, batch_size)
    return curve.predictions[batch_size]


def _predict(curve: Curve, batch_size: int) -> Prediction | None:
    points = curve.points
    if not points:
        return None
    own = curve.index.get(bucket_of(batch_size))
    measured = own is not None
    if len(points) == 1:
        return Prediction(curve.costs[0], curve.errors[0], True) if measured else None
    xs, ys, errors, x = curve.xs, curve.ys, curve.errors, float(batch_size)
    if own is not None and curve.slopes[own] > 0.0:  # the bucket's own periods tell its slope
        return Prediction(curve.at_own(own, x), errors[own], True)
    if x <= xs[0] or x >= xs[-1]:
        end = 0 if x <= xs[0] else -1
        # within a measured bucket the nearest segment's slope; farther, all points' slope
        near = (
            (ys[1] - ys[0]) / (xs[1] - xs[0]) if end == 0 else (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
        )
        if measured:
            slope = max(0.0, near)
        elif end == 0:
            slope = theil_sen_slope(xs, ys)
        else:  # above the largest bucket: at least as steep as below it
            slope = max(theil_sen_slope(xs, ys), _convex_slope(curve, len(xs) - 2, len(xs) - 1))
        seconds = max(ys[end] + slope * (x - xs[end]), ys[0] / 2)  # ys[0]: the least
        error = errors[end] * (1.0 if measured else 2.0)
        return Prediction(seconds, error, measured)
    right = next(i for i, xi in enumerate(xs) if xi >= x)
    left = right - 1
    share = (x - xs[left]) / (xs[right] - xs[left]) if xs[right] > xs[left] else 0.0
    seconds = ys[left] + share * (ys[right] - ys[left])
    error = max(errors[left], errors[right])
    return Prediction(seconds, error, measured)


@dataclass(frozen=True)
class Bracket:
    """Where a state's step time at a batch size can lie (``low`` to ``high`` seconds), and
    the largest relative standard error of the measurements it rests on."""

    low: float
    high: float
    relative_error: float


def bracket(
    cal: Calibration,
    spec_on: bool,
    batch_size: int,
    min_samples: int,
    stalls_after: int | None = None,
) -> Bracket | None:
    """Where the seconds of a result of ``spec_on``'s state at ``batch_size`` can lie (read as
    :func:`predict` reads them), from its measured buckets and two properties of any batched
    step: a larger batch never steps faster, and never costs more per request (``t(x)``
    non-decreasing, ``t(x) / x`` non-increasing). A measured bucket gives its cost; next to a
    measured bucket of size ``s`` and cost ``c`` the step lies between ``c`` and ``c * x / s``
    (above it) or ``c * x / s`` and ``c`` (below it); between two, within both. Above the
    largest of two or more, up to twice its size, a third: the step grows at least as steeply
    as between the two largest (:func:`_convex_slope`: flat while memory bound, then linear).
    Farther up that slope bounds nothing: a bend between two small buckets is in it (the plain
    step at 1 and 2 requests, 4.78 and 4.96 ms, put 64 at 16 ms, not 6.8: LABBOOK, "Twelfth
    session"). No model of the curve's shape: a bound, for telling where measuring cannot
    change a decision. None when no bucket is measured.

    >>> cal = Calibration()
    >>> for step in range(12):
    ...     cal = fold(cal, step, batch_size=4, ran_on=True, period=0.008, window=16)
    >>> found = bracket(cal, True, 16, min_samples=8)  # 8 ms at 4 requests: 8 to 32 ms at 16
    >>> (found.low, found.high)
    (0.008, 0.032)
    """
    curve = cal.curve(spec_on, min_samples, stalls_after)
    if not curve.points:
        return None
    if (own := curve.index.get(bucket_of(batch_size))) is not None:
        at = curve.at_own(own, float(batch_size), curve.costs)
        return Bracket(at, at, curve.errors[own])
    x = float(batch_size)
    left = [i for i, size in enumerate(curve.xs) if size <= x]
    right = [i for i, size in enumerate(curve.xs) if size >= x]
    low, high, used = 0.0, math.inf, []
    if left:
        i = left[-1]
        low, high = curve.costs[i], curve.costs[i] * x / curve.xs[i]
        used.append(i)
    if right:
        i = right[0]
        low, high = max(low, curve.costs[i] * x / curve.xs[i]), min(high, curve.costs[i])
        used.append(i)
    elif len(left) >= 2 and x <= 2 * curve.xs[left[-1]]:  # next to the largest: as steeply
        i, j = left[-2], left[-1]
        low = min(high, max(low, curve.costs[j] + _convex_slope(curve, i, j) * (x - curve.xs[j])))
        used.append(left[-2])
    error = max(curve.errors[i] for i in used)
    return Bracket(min(low, high), max(low, high), error)


def _convex_slope(curve: Curve, i: int, j: int) -> float:
    """The least slope of the step above the largest measured bucket ``j`` (``i`` the one
    below): a batched step is flat while it is memory bound and grows linearly once compute
    bound, so its slope never falls with the batch, and above ``j`` it grows at least as fast
    as between ``i`` and ``j`` (taken low by one standard error of each cost, never below 0)."""
    rise = curve.costs[j] * (1.0 - curve.errors[j]) - curve.costs[i] * (1.0 + curve.errors[i])
    return max(0.0, rise / (curve.xs[j] - curve.xs[i]))  # buckets' medians grow strictly


def _non_decreasing(values: Iterable[float]) -> tuple[float, ...]:
    """The running maximum: a larger batch never steps faster (a bucket measured while the
    contexts were short must not predict a cheaper step than a smaller bucket)."""
    return tuple(accumulate(values, max))
