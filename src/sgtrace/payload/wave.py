"""Waves: requests that arrive together and make most of the batch, and which state serves the
whole of them faster.

A decision at one batch size sees one step of each state; a wave of requests of different
lengths (``max_new_tokens`` with ``ignore_eos``: they finish by length) then shrinks, and the
requests left in its tail decode in ever smaller batches, where speculation pays more. Live, a
wave of 64 requests of 64-192 new tokens ran 17% faster speculating than without (the good
draft, ``bench/results/live/sweep/call33``), yet at 64 requests the two states' steps were
within a few percent, and the hook, deciding by the step at hand, ran the wave's start off and
switched on in its tail: 10% behind speculating throughout.

:func:`wave_of` puts the whole wave in both states: without speculation request ``i`` takes
``L_i`` steps, speculating about ``L_i / A``; the batch at each step is the requests not
finished yet, and each step costs what :func:`~.calibration.predict` says at that batch size.
The requests of the batch whose length is not known (running ones, or ones that may stop at
the end of sequence) count at the wave's median length. Speculating, a request's tokens a
step vary (``spread``, the accept lengths' variance), so requests of one length finish over
several steps and the wave ends with its slowest (:func:`_ragged`). The policy holds
speculation on for a wave it serves faster that finds the server idle (:mod:`.calibrated`;
where requests run, a closed loop replaces those that finish and the batch does not drain: in
simulated bursts of 8 and 96 clients a hold lost 10%); one that the off state serves faster
runs off until its first request ends, and its tail is left to the step-by-step rules, which
switch on where speculation wins there.

>>> from .calibration import fold
>>> cal = Calibration()
>>> for size, on, seconds in ((64, True, 0.0228), (16, True, 0.0096), (64, False, 0.0068),
...                           (16, False, 0.0053)):
...     for step in range(10):
...         cal = fold(cal, step, size, on, seconds, 16)
>>> found = wave_of(PolicyConfig(), cal, 3.4, tuple(range(64, 192, 2)), 64)
>>> found.spec < found.plain  # at 64 the steps tie (3.4 / 22.8 ms, 1 / 6.8 ms); the tail not
True
"""

from __future__ import annotations

import math
from dataclasses import replace
from itertools import groupby

from .calibration import Calibration, predict
from .cohort import MIN_COHORT, Round
from .policy import PolicyConfig, Reason
from .rules import Mode, PolicyState, Proposal

TAIL_SDS = 5.0  # a request finishes within this many standard deviations of its mean steps


def wave_of(
    config: PolicyConfig,
    cal: Calibration,
    accept: float | None,
    lengths: tuple[int, ...],
    batch_size: int,
    spread: float | None = None,
    extrapolated: bool = False,
    tail: bool = False,
) -> Round | None:
    """The seconds until the last request of a batch of ``batch_size`` finishes, speculating
    (``spec``) and not (``plain``), where ``lengths`` (ascending) are known for half of the
    batch or more and :data:`~.cohort.MIN_COHORT` requests at least (with ``tail``, any: they
    are what is left of a wave, :mod:`.tail`); None otherwise, where
    either state is not measured in the batch's own bucket (an extrapolated step decides no
    wave: held, the wave would leave the other state unprobed there for good), or where a
    state's step cannot be predicted at a batch size the wave passes through. With
    ``extrapolated``, a state's step extrapolated to the bucket decides too (a probe's verdict
    on a wave: the probe measured the other state there, and the hold ends)."""
    if accept is None or accept <= 1.0 or not lengths:
        return None
    if not tail and not _makes_wave(len(lengths), batch_size):
        return None
    first = [predict(cal, on, batch_size, config.min_samples) for on in (True, False)]
    if not all(p is not None and (p.is_measured or extrapolated) for p in first):
        return None
    middle = lengths[len(lengths) // 2]
    known = sorted((*lengths, *(middle,) * max(0, batch_size - len(lengths))))
    even = spread is None or spread <= 1e-9  # every request as many tokens a step
    spec = plain = 0.0
    done, left = 0, len(known)
    for length, group in groupby(known):
        tokens = length - done  # every request left makes these tokens before the next ends
        off = predict(cal, False, left, config.min_samples)
        if off is None:
            return None
        plain += tokens * off.seconds
        if even:
            on = predict(cal, True, left, config.min_samples)
            if on is None:
                return None
            spec += tokens / accept * on.seconds
        done, left = length, left - len(list(group))
    if not even:  # speculating, the wave's end is ragged
        assert spread is not None
        ragged = _ragged(config, cal, accept, spread, known)
        return None if ragged is None else Round(ragged, plain)
    return Round(spec, plain)


def _ragged(
    config: PolicyConfig, cal: Calibration, accept: float, spread: float, known: list[int]
) -> float | None:
    """The seconds until the last of requests of ``known`` lengths finishes speculating, where
    a request's tokens a step vary by ``spread`` (their variance): request ``i`` then finishes
    after about ``(L_i - 1/2) / A + (spread + A**2) / (2 A**2)`` steps (a renewal count's mean:
    its last step overshoots), give or take ``sqrt(L_i * spread / A**3)``, and the wave ends
    with its slowest request. Step by step: the chance that any request is left, times a
    step's cost at the number expected left given one is. Checked against drawn accept
    lengths (``tests/hooks/test_policy_waves.py``)."""
    sd = math.sqrt(spread / accept**3)
    # the mean steps to make n tokens: the renewal count's, its last step overshooting
    extra = (spread + accept * accept) / (2.0 * accept * accept) - 0.5 / accept
    groups = [(n / accept + extra, sd * math.sqrt(n), len(list(g))) for n, g in groupby(known)]
    end = max(mu + TAIL_SDS * sigma for mu, sigma, _ in groups)
    # the hook runs this on a wave's arrival and in its tail (tail.py): each group's scale made
    # once, and the groups done for good (erfc saturated: done exactly 1.0, adding 0.0 and
    # multiplying by 1.0 from then on, as x only grows) left out; the sums are the same floats
    scaled = [(mu, sigma * math.sqrt(2.0), count) for mu, sigma, count in groups]
    erfc, first = math.erfc, 0
    seconds, x = 0.0, 0.5  # the middle of the first step
    while x < end:
        left, none_left = 0.0, 1.0
        for i in range(first, len(scaled)):
            mu, scale, count = scaled[i]
            done = 0.5 * erfc((mu - x) / scale)
            if done == 1.0 and i == first:
                first += 1
                continue
            left += count * (1.0 - done)
            none_left *= done if count == 1 else done**count
        running = 1.0 - none_left
        if running <= 0.0:
            break
        on = predict(cal, True, max(1, round(left / running)), config.min_samples)
        if on is None:
            return None
        seconds += running * on.seconds
        x += 1.0
    return seconds


def hold_wave(
    config: PolicyConfig,
    state: PolicyState,
    wave: tuple[tuple[int, ...], int],
    current: bool,
    step: int,
    lag: int,
    extrapolated: bool = False,
) -> tuple[Proposal, PolicyState] | None:
    """Hold a wave of ``lengths`` (ascending) in a batch of ``batch_size`` (``wave``) from
    ``step`` in the state that serves all of it faster by ``min_margin``, else in
    ``current`` (the tie's: :mod:`.arrivals` passes the state the steps prefer): on until
    its longest request's expected end, off until its first's (the steps then judge its
    tail), ``lag`` results more (the decision's own lag). The proposal
    and the state that holds it (no wave then waits for a probe's verdict,
    ``PolicyState.wave_left``); None where :func:`wave_of` cannot tell."""
    lengths, batch_size = wave
    cal, accept = state.calibration or Calibration(), state.accept_mean
    found = wave_of(config, cal, accept, lengths, batch_size, state.accept_var, extrapolated)
    if found is None or accept is None:
        return None
    margin = 1.0 + config.min_margin
    on = found.plain > found.spec * margin or (current and found.spec <= found.plain * margin)
    until = step + lag + (math.ceil(lengths[-1] / accept) if on else lengths[0])
    held = replace(cal, cohort_until=until, cohort_on=on)
    state = replace(state, calibration=held, wave_left=(), wave_made=0.0)
    return Proposal(on, Reason.COHORT, Mode.NORMAL, state.failed_probes), state


def verdict(
    config: PolicyConfig, state: PolicyState, batch_size: int, current: bool, step: int, lag: int
) -> tuple[Proposal | None, PolicyState]:
    """A probe's verdict on the wave it started with (``PolicyState.wave_left``): what is left
    of the wave held in the state that serves it faster (a tie: ``current``), both states'
    steps now known in its bucket or extrapolated to it; None where :func:`wave_of` cannot
    tell. The state returned holds no wave any more."""
    left = left_of(state.wave_left, state.wave_made)
    held = hold_wave(config, state, (left, batch_size), current, step, lag, True)
    if held is not None:
        return held
    return None, replace(state, wave_left=(), wave_made=0.0)


def left_of(lengths: tuple[int, ...], made: float) -> tuple[int, ...]:
    """The tokens left to each request of a wave of ``lengths`` (ascending) after each made
    ``made`` (the finished ones left out).

    >>> left_of((64, 64, 128), 63.5)
    (1, 1, 65)
    """
    return tuple(math.ceil(n - made) for n in lengths if n > made)


def wave_lengths(counts: dict[int, int], batch_size: int) -> tuple[int, ...]:
    """The lengths of ``counts`` (requests by length) ascending, where they make a wave: half
    the batch of ``batch_size`` or more, and :data:`~.cohort.MIN_COHORT` requests at least;
    else none.

    >>> wave_lengths({128: 3, 64: 2}, 8), wave_lengths({128: 3, 64: 2}, 16)
    ((64, 64, 128, 128, 128), ())
    """
    if not _makes_wave(sum(counts.values()), batch_size):
        return ()
    return tuple(n for n in sorted(counts) for _ in range(counts[n]))


def _makes_wave(known: int, batch_size: int) -> bool:
    """Whether ``known`` requests of known length make a wave of a batch of ``batch_size``."""
    return known >= max(MIN_COHORT, batch_size / 2)


__all__ = ["hold_wave", "left_of", "verdict", "wave_lengths", "wave_of"]
