"""A switch on in a wave's tail is made only where it pays for itself before the tail ends.

A wave that the off state serves faster runs off until its first request ends (:mod:`.wave`);
its tail is then left to the step-by-step rules (:mod:`.calibrated`), which switch on where
speculation's step wins at the batch size at hand. But a switch with requests running costs
plain steps (:mod:`.switchcost`: live, 5-11 with 15-40 requests running), and a tail lasts only
until its longest request ends. Live (an H100, the fair draft, waves of 128 requests of 64-192
new tokens, ``bench/results/live/sweep/call56``), the hook switched on with 15-40 requests left
in eight turns of nine, and each of those turns ran 1.5-12% behind no speculation; the turn
without a switch 0.5%. With this rule (call 61) the switches came at 9-21 requests left and the
level ran 1.8% behind, from 4.3%, though the rule stood aside at most results of the tails
(:data:`OVERLAP`).

Where the requests running are a wave's that arrived on an idle server and none has joined
since (``PolicyState.tail_lengths``, set and cleared on arrivals, :mod:`.arrivals`; the batch no
larger than the wave's requests left), what is left of each is its length less the tokens it
made (``PolicyState.tail_made``: the prefill's one, then one a plain result and a verify's mean
accept length a speculating one) by the time the switch takes effect
(:data:`~.probes.LAG_RESULTS`). The switch is made only where speculation ends what is left
sooner by the switch's predicted cost (``cost_at(n) * t_off(n)``, as this server measured its
switches) and the switching margin of the plain tail: ``plain - spec > cost + min_margin *
plain``, both from :func:`~.wave.wave_of`'s model (the ragged end included). Anywhere else, or
where the model cannot tell, the steps' rule stands as before.

A switch off is left to the steps' rule, though the same test could be put to it (live, call
63: a probe of speculation at a wave's arrival of 128 read it 4.8% slower and switched off with
128 requests running, a turn at 0.88, where speculating on would have ended the wave about as
soon). A switch off is what the steps' rule makes where speculation's measured steps ran slower
than the model has them (a turn of slow verifies, ``Window.steady``); judged by the model it
would be kept on through such a turn: simulated with them (``bench/policy_bench.py
--slow-turns 1.8 7``, 24 seeds), that cost the fair draft spread at 128 7.5% ± 4.1%.

>>> from dataclasses import replace
>>> from .calibration import Calibration, fold
>>> from .policy import PolicyConfig
>>> from .rules import PolicyState
>>> cal = Calibration()
>>> for size, on, seconds in ((32, True, 0.0100), (32, False, 0.0049), (16, True, 0.0075),
...                           (16, False, 0.0046)):
...     for step in range(10):
...         cal = fold(cal, step, size, on, seconds, 16)
>>> state = PolicyState(accept_mean=2.5, calibration=cal, switch_fit=(1.0, 30, 900, 10, 300),
...                     wave_at=0, tail_lengths=tuple(range(64, 192)), tail_made=164.0)
>>> pays_in_tail(PolicyConfig(), state, 28, 162, True)  # 28 requests running, 0-27 tokens to go
False
>>> tail_line(PolicyConfig(), state, 28, 162)  # 25 left where it would take effect
'tail_left=25 tail_on=70.3ms tail_off=113.6ms switch=50.5ms'
>>> tail_line(PolicyConfig(), state, 30, 162)  # more running than the wave has (OVERLAP)
'tail=-'
>>> pays_in_tail(PolicyConfig(), replace(state, tail_lengths=(*range(64, 180), *(400,) * 12)),
...              28, 162, True)  # a dozen of them have 200-odd tokens to go
True
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .calibration import Calibration, predict
from .policy import PolicyConfig
from .probes import LAG_RESULTS
from .rules import PolicyState
from .switchcost import cost_at
from .wave import left_of, wave_of

RECHECK = 0.75  # a kept switch is judged again where the requests running fell to this share
# A request that ends on a result is still in the next result's batch: SGLang's overlap
# scheduler launches a batch before the result of the one before is processed (live, in every
# wave of call 61's trace). So a batch is checked against the wave's requests left this many
# results (tokens, off) back; with one, a batch exceeded them at 70-82 of a spread wave's
# 180-192 results, most of its tail's, and the rule stood aside there
OVERLAP = 2


@dataclass(frozen=True)
class Tail:
    """What is left of a wave where a switch on would take effect: ``left`` requests, the
    seconds until the last ends speculating (``spec``) and not (``plain``), and the switch's
    predicted cost in seconds (``cost``)."""

    left: int
    spec: float
    plain: float
    cost: float

    @property
    def pays(self) -> bool:
        """Whether speculating ends what is left sooner by the switch's cost and the margin
        of the plain tail (``min_margin``, folded in by :func:`tail_of`)."""
        return self.plain - self.spec > self.cost


def tail_of(config: PolicyConfig, state: PolicyState, batch_size: int, step: int) -> Tail | None:
    """What is left of the wave running at result ``step`` with ``batch_size`` requests, where
    a switch on would take effect (:data:`~.probes.LAG_RESULTS` later); None where no tail is
    known (no wave's lengths, requests the wave does not know running) or the model cannot
    tell. The cost carries the margin: ``cost_at(n) * t_off(n) + min_margin * plain``."""
    lengths, at, made = state.tail_lengths, state.wave_at, state.tail_made
    if not lengths or at < 0 or step < at:
        return None
    if batch_size > len(left_of(lengths, made - OVERLAP)):  # requests the wave never had
        return None
    cal = state.calibration or Calibration()
    off = predict(cal, False, batch_size, config.min_samples)
    if off is None:
        return None
    cost = cost_at(state.switch_fit, batch_size) * off.seconds
    left = left_of(lengths, made + LAG_RESULTS - 1)  # one token a result, off, until then
    if not left:  # the tail ends before the switch takes effect
        return Tail(0, 0.0, 0.0, cost)
    found = wave_of(config, cal, state.accept_mean, left, len(left), state.accept_var, True, True)
    if found is None:
        return None
    return Tail(len(left), found.spec, found.plain, cost + config.min_margin * found.plain)


def pays_in_tail(
    config: PolicyConfig, state: PolicyState, batch_size: int, step: int, to_on: bool
) -> bool:
    """Whether a switch (``to_on``: on) at result ``step`` with ``batch_size`` requests running
    pays for itself before the wave's tail ends; True for a switch off and where no tail is
    known (the module docstring)."""
    if not to_on:
        return True
    tail = tail_of(config, state, batch_size, step)
    return tail is None or tail.pays


def kept_in_tail(
    config: PolicyConfig, state: PolicyState, batch_size: int, step: int, to_on: bool
) -> PolicyState | None:
    """The state that keeps a switch (``to_on``: on) at result ``step`` with ``batch_size``
    requests running, where the tail cannot repay it (:func:`pays_in_tail`); None where the
    switch goes ahead. A kept switch is judged again only once the requests running fell to
    :data:`RECHECK` of those it was kept at (``PolicyState.tail_held``): the wave model costs
    the hook 0.1-0.9 ms a judgment on this repository's machine (a tail of 18-88 requests,
    ``_ragged``), a fifth of a decode step and more, where judged at every result of a tail it
    would cost the tail's turn 1-2%; a tail of 128 is judged at most a dozen times."""
    if not to_on or not state.tail_lengths:
        return None
    if state.tail_held and batch_size > state.tail_held * RECHECK:
        return state
    if pays_in_tail(config, state, batch_size, step, to_on):
        return None
    return replace(state, tail_held=batch_size)


def tail_line(config: PolicyConfig, state: PolicyState, batch_size: int, step: int) -> str:
    """The numbers a switch in the tail was judged by, for the hook's log (:mod:`.explain`)."""
    tail = tail_of(config, state, batch_size, step)
    if tail is None:
        return "tail=-"
    return (
        f"tail_left={tail.left} tail_on={tail.spec * 1e3:.1f}ms tail_off={tail.plain * 1e3:.1f}ms "
        f"switch={tail.cost * 1e3:.1f}ms"
    )


__all__ = ["OVERLAP", "RECHECK", "Tail", "kept_in_tail", "pays_in_tail", "tail_line", "tail_of"]
