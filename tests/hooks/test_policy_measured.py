"""The measured policy (``measure=True``): it times both states per batch-size bucket and keeps
the faster one, within a margin, re-measuring the other now and then."""

from __future__ import annotations

import json

import pytest

from sgtrace.payload.measured import MAX_BLOCK_SAMPLE, bucket_of
from sgtrace.payload.policies import make_policy
from sgtrace.payload.policy import Decision, Observation, PolicyConfig
from sgtrace.payload.rules import PolicyState


def _timed_run(config: PolicyConfig, phases, period_of) -> list[Decision]:
    """Feed ``config`` a run of ``(batch_size, steps)`` phases whose step periods come from
    ``period_of(step, batch_size, spec_on)``; speculation accepts 3 tokens a verify."""
    policy, spec_on, step, out = make_policy(config), True, 0, []
    for size, steps in phases:
        for _ in range(steps):
            lengths = (3.0,) * size if spec_on else None
            decision = policy.decide(
                Observation(step, size, lengths, spec_on, period_of(step, size, spec_on))
            )
            out.append(decision)
            spec_on, step = decision.spec_on, step + 1
    return out


def test_measure_keeps_the_state_within_the_margin_and_remeasures_the_other() -> None:
    # speculation 3 tokens in 2.95 ms against 1 token in 1 ms: 1.7% better, inside a 3% margin
    config = PolicyConfig(measure=True, measure_steps=4, measure_s=0.0, remeasure_s=0.1)
    decisions = _timed_run(config, [(1, 300)], lambda _s, _b, on: 0.00295 if on else 0.001)
    toggles = [(d.step, d.spec_on, d.reason.value) for d in decisions if d.changed]
    # on measured (steps 0-3), off explored (settled 2 steps, then 4 a measurement): stays off
    # within the margin; at the first measurement 0.1 s of decoding (100 off steps) after the on
    # one, on is measured again (and kept, within the margin), and 0.1 s (34 on steps) later
    # off again
    assert toggles[:3] == [(3, False, "explore"), (105, True, "explore"), (139, False, "explore")]
    assert {d.reason.value for d in decisions} <= {"startup", "steady", "explore"}


def test_a_measurement_is_the_median_of_its_results_and_idle_gaps_do_not_count() -> None:
    # plain decoding: 1 ms a step, but every 8th step 30 ms (the host streamed responses);
    # speculation: 3 tokens a verify in 4 ms; a 5 s idle gap at step 50. By the mean of a
    # block (8 tokens a request in 37 ms: 216 a second) speculation (750) would win; by the
    # steps' own cost plain decoding (1000) does
    config = PolicyConfig(measure=True, measure_steps=8, measure_s=0.05, remeasure_s=1000.0)

    def period(step: int, _size: int, on: bool) -> float:
        if step == 50:
            return 5.0
        return 0.004 if on else (0.03 if step % 8 == 0 else 0.001)

    policy, spec_on = make_policy(config), True
    for step in range(200):
        lengths = (3.0,) * 4 if spec_on else None
        decision = policy.decide(Observation(step, 4, lengths, spec_on, period(step, 4, spec_on)))
        spec_on = decision.spec_on
    (rates, *others) = policy.state.rates
    assert (rates.bucket, others) == (4, [])
    assert rates.on == pytest.approx(3.0 / 0.004)
    assert rates.off == pytest.approx(1 / 0.001)
    assert not spec_on
    state = policy.state
    assert state.clock_s < 1.0  # the idle gap is not decoding time
    # the state round-trips through JSON, measurements and the block in progress included
    assert state.block is not None and len(state.block.goodputs) == state.block.results > 1
    assert PolicyState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


def test_batch_sizes_measure_by_power_of_two_buckets() -> None:
    sizes = (0, 1, 2, 3, 4, 5, 8, 9, 64, 65, 128)
    assert [bucket_of(n) for n in sizes] == [1, 1, 2, 4, 4, 8, 8, 16, 64, 128, 128]


def test_measure_counts_speculation_at_its_accept_length_away_from_toggles() -> None:
    # speculation: 4 requests, 2 ms a step, 3.4 tokens a verify once warm (6800 tokens/s);
    # plain decoding 1 ms a step (4000 tokens/s). For 100 steps after speculation turns back
    # on the requests that decoded while off accept 1.5 (3000 tokens/s): measured as it ran,
    # speculation would lose right after every exploration of the off state and stay off
    config = PolicyConfig(measure=True, measure_steps=8, measure_s=0.0, remeasure_s=0.5)
    policy, spec_on, toggled_on, states, toggles = make_policy(config), True, None, [], []
    for step in range(3000):
        cold = toggled_on is not None and step - toggled_on < 100
        lengths = ((1.5 if cold else 3.4),) * 4 if spec_on else None
        period = 0.002 if spec_on else 0.001
        decision = policy.decide(Observation(step, 4, lengths, spec_on, period))
        if decision.changed:
            toggles.append((decision.spec_on, decision.reason.value))
            toggled_on = step if decision.spec_on else toggled_on
        spec_on = decision.spec_on
        states.append(spec_on)
    assert policy.state.warm_accept == pytest.approx(3.4)
    # every exploration of the off state ends back on, measured, and cold spells do not count
    assert toggles[:4] == [(False, "explore"), (True, "measured")] * 2
    assert set(toggles) == {(False, "explore"), (True, "measured")}
    assert sum(states) / len(states) > 0.95


def test_measure_never_chooses_a_draft_below_the_breakeven_but_keeps_exploring_it() -> None:
    # the periods say speculation wins (4 requests at 1.1 tokens a verify in 1 ms, against 1
    # token in 1.2 ms: 4400 against 3333 tokens/s), but 1.1 is below the breakeven (1.3): the
    # gate only lets it be explored; without the gate the measurement decides
    def run(gate: bool) -> tuple[list[tuple[bool, str]], float]:
        config = PolicyConfig(
            measure=True, measure_steps=8, measure_s=0.0, remeasure_s=0.05, acceptance_gate=gate
        )
        policy, spec_on, toggles, on_steps = make_policy(config), True, [], 0
        for step in range(600):
            lengths = (1.1,) * 4 if spec_on else None
            obs = Observation(step, 4, lengths, spec_on, 0.001 if spec_on else 0.0012)
            decision = policy.decide(obs)
            if decision.changed:
                toggles.append((decision.spec_on, decision.reason.value))
            spec_on = decision.spec_on
            on_steps += spec_on
        return toggles, on_steps / 600

    toggles, on_share = run(gate=False)
    assert toggles[:2] == [(False, "explore"), (True, "measured")] and on_share > 0.75
    toggles, on_share = run(gate=True)
    # off once its first measurement completes, then on for one measurement (8 results and 2
    # settling) every 0.05 s of decoding (~50 steps)
    assert toggles[:3] == [(False, "low-acceptance"), (True, "explore"), (False, "low-acceptance")]
    assert set(toggles) == {(True, "explore"), (False, "low-acceptance")}
    assert 0.1 < on_share < 0.3


def test_measure_compares_the_states_per_request_whatever_the_batch_size_in_the_bucket() -> None:
    # speculation measured at 64 requests (3 tokens in 20 ms: 150 tokens/s a request, 9600 for
    # the batch), plain decoding then at 34 of the same bucket (1 token in 5 ms: 200 a request,
    # 6800 for the batch): per request plain decoding is the better, and stays
    config = PolicyConfig(
        on_below=64, off_above=128, measure=True, measure_steps=4, measure_s=0.0, remeasure_s=1.0
    )
    decisions = _timed_run(config, [(64, 4), (34, 40)], lambda _s, _b, on: 0.02 if on else 0.005)
    toggles = [(d.step, d.spec_on, d.reason.value) for d in decisions if d.changed]
    assert toggles == [(3, False, "explore")]


def test_a_block_of_many_fast_results_keeps_a_bounded_sample() -> None:
    # 0.1 ms steps (every 10th 1 ms) for a 0.5 s block: thousands of results, a sample of them
    # kept, and the median still that of the whole block
    config = PolicyConfig(measure=True, measure_steps=8, measure_s=0.5, remeasure_s=1000.0)
    policy, longest = make_policy(config), 0
    for step in range(6000):
        period = 0.001 if step % 10 == 0 else 0.0001
        policy.decide(Observation(step, 4, None, False, period))
        if policy.state.block is not None:
            longest = max(longest, len(policy.state.block.goodputs))
    assert longest <= MAX_BLOCK_SAMPLE
    assert policy.state.rates[0].off == pytest.approx(1 / 0.0001)
