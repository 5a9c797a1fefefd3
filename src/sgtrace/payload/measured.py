"""The measured policy (``measure = true``): the state whose goodput was measured higher.

Where speculation stops paying depends on the machine as much as on the models (how much of a
speculative step's host work hides behind the GPU), so this policy measures instead of using the
load rule. Each decode result comes with the time since the previous one (``step_period_s``,
``None`` when another batch, a prefill, ran in between); its tokens per request over that time
is the decode goodput per request of the state that ran, kept per batch-size bucket (the next
power of two: within a bucket the batch size may double, and the goodput of a batch with it).

* A measurement is the median goodput of results in a row of one bucket and state once they
  span ``measure_s`` seconds and ``measure_steps`` results: the host's other work now and then
  stretches one step several times over, which weighs more in a plain step than in a
  speculative one; the median leaves such steps out of both states.
* A speculative result counts its tokens at the accept length seen :data:`WARM_STEPS` or more
  after the last toggle: right after speculation turns back on, requests that decoded while it
  was off accept less until they finish, a cost of the toggle, not of the state. Results within
  :data:`SETTLE_STEPS` of a toggle straddle the switch and a period over :data:`IDLE_S` is an
  idle server: neither counts.
* When a measurement of the state in force completes, the other state of its bucket is measured
  if it never was or its measurement is ``remeasure_s`` seconds of decoding old (``explore``),
  else the policy switches when the other's goodput is better by ``measure_margin``
  (``measured``). With the acceptance gate a draft that accepts less than the breakeven is only
  explored, never chosen. Decisions follow measurements, so no dwell applies.

The clock makes ranks decide apart: at TP size > 1 one rank decides and the hook carries its
decisions to the others (:mod:`.carry`); where it cannot, the load rule decides instead. A trace
records the periods, so a replay still decides alike.
"""

from __future__ import annotations

import statistics
from dataclasses import replace

from .policy import Decision, Observation, PolicyConfig, Reason
from .rules import (
    Block,
    BucketRates,
    PolicyState,
    Proposal,
    StatefulPolicy,
    accepts_too_little,
    check_order,
    conclude,
    mean,
    observe,
    startup,
)

SETTLE_STEPS = 2  # results this close after a toggle straddle the switch
WARM_STEPS = 128  # speculative results this long after a toggle accept as usual
IDLE_S = 1.0  # a longer period is a server that had nothing to do, not a step
MAX_BLOCK_SAMPLE = 256  # the most goodputs a block keeps (a step stays O(1))


def bucket_of(batch_size: int) -> int:
    """The measuring bucket of a batch size: the next power of two (1, 2, 4, 8, ...)."""
    return 1 << max(0, batch_size - 1).bit_length()


def rates_at(state: PolicyState, batch_size: int) -> BucketRates | None:
    """The measured rates of ``batch_size``'s bucket, or None."""
    bucket = bucket_of(batch_size)
    return next((entry for entry in state.rates if entry.bucket == bucket), None)


class MeasuredPolicy(StatefulPolicy):
    """The measured policy and its state (see the module docstring)."""

    def advance(self, state: PolicyState, obs: Observation) -> tuple[PolicyState, Decision]:
        """The next state and the decision for ``obs``. Pure."""
        check_order(state, obs)
        config = self.config
        observed = _measure(config, observe(config, state, obs), obs)
        if state.last_step is None:
            proposal = startup(config, obs)
        else:
            proposal = _propose(config, observed, obs)
        return conclude(config, observed, obs, proposal, keeps_accept_mean=True)


def _measure(config: PolicyConfig, state: PolicyState, obs: Observation) -> PolicyState:
    """Fold this result's tokens and period into the block; a full block becomes a rate."""
    period = obs.step_period_s
    if period is None or not 0 < period <= IDLE_S or obs.batch_size < 1:
        return state
    clock = state.clock_s + period
    ran_on = bool(obs.accept_lengths)
    accepted = mean(obs.accept_lengths) if obs.accept_lengths else 1.0
    since = None if state.last_toggle_step is None else obs.step - state.last_toggle_step
    warm = state.warm_accept
    if ran_on and (since is None or since > WARM_STEPS):
        warm = accepted if warm is None else warm + config.accept_ema_alpha * (accepted - warm)
    if since is not None and since <= SETTLE_STEPS:
        return replace(state, clock_s=clock, warm_accept=warm, block=None)
    per_request = (accepted if warm is None else warm) if ran_on else 1.0
    bucket = bucket_of(obs.batch_size)
    block = state.block
    if block is None or block.bucket != bucket or block.ran_on != ran_on:
        block = Block(bucket, ran_on)
    goodputs = (*block.goodputs, per_request / period)
    if len(goodputs) > MAX_BLOCK_SAMPLE:  # fast steps: keep every other one, a fair sample
        goodputs = goodputs[::2]
    block = Block(bucket, ran_on, block.seconds + period, block.results + 1, goodputs)
    if block.results < config.measure_steps or block.seconds < config.measure_s:
        return replace(state, clock_s=clock, warm_accept=warm, block=block)
    rates = {entry.bucket: entry for entry in state.rates}
    entry = rates.get(bucket, BucketRates(bucket))
    median = statistics.median(goodputs)
    if ran_on:
        rates[bucket] = replace(entry, on=median, on_at=clock)
    else:
        rates[bucket] = replace(entry, off=median, off_at=clock)
    rates_now = tuple(rates[key] for key in sorted(rates))
    return replace(state, clock_s=clock, warm_accept=warm, rates=rates_now, block=None)


def _propose(config: PolicyConfig, state: PolicyState, obs: Observation) -> Proposal:
    """After a measurement of the state in force: explore the other, or take the better."""
    keep = Proposal(obs.spec_on, Reason.STEADY)
    entry = rates_at(state, obs.batch_size)
    if entry is None:
        return keep
    on, on_at, off, off_at = entry.on, entry.on_at, entry.off, entry.off_at
    mine, mine_at, other, other_at = (
        (on, on_at, off, off_at) if obs.spec_on else (off, off_at, on, on_at)
    )
    if mine is None or mine_at != state.clock_s:  # no measurement of this state completed now
        return keep
    if obs.spec_on and accepts_too_little(config, state, obs.batch_size):
        return Proposal(False, Reason.LOW_ACCEPTANCE)
    if other is None or other_at is None or state.clock_s - other_at >= config.remeasure_s:
        return Proposal(not obs.spec_on, Reason.EXPLORE)
    if other > mine * (1.0 + config.measure_margin):
        if not obs.spec_on and accepts_too_little(config, state, obs.batch_size):
            return keep
        return Proposal(not obs.spec_on, Reason.MEASURED)
    return keep


def measurement_line(state: PolicyState, step: int, rank: int, batch_size: int) -> str | None:
    """The log line of a completed measurement: both states' goodput in its bucket (tokens per
    request-second, and how many seconds of decoding ago each was measured); None without one."""
    entry = rates_at(state, batch_size)
    if entry is None:
        return None

    def show(rate: float | None, at: float | None) -> str:
        return "-" if rate is None or at is None else f"{rate:.1f}@{state.clock_s - at:.1f}s"

    accept = "-" if state.accept_mean is None else f"{state.accept_mean:.2f}"
    return (
        f"sgtrace-hook measured step={step} rank={rank} bucket={entry.bucket} "
        f"batch_size={batch_size} on={show(entry.on, entry.on_at)} "
        f"off={show(entry.off, entry.off_at)} accept={accept}"
    )
