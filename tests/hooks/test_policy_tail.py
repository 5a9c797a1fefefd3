"""A wave's tail (``sgtrace.payload.tail``): the calibrated policy switches on in the tail of a
wave it ran off only where what is left of the wave pays for the switch, and off as the steps'
rule says; and the wave model's ragged end, which the tail's judgment runs, computed alike with
less work."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from itertools import groupby, pairwise

import pytest
from tests.hooks.test_policy_waves import CALIBRATED, seconds, spread, state_with, wave_arrival

from sgtrace.payload import tail
from sgtrace.payload.calibrated import CalibratedPolicy
from sgtrace.payload.calibration import Calibration, fold, predict
from sgtrace.payload.policy import Decision, Observation, Reason
from sgtrace.payload.rules import PolicyState
from sgtrace.payload.switchcost import fold_cost
from sgtrace.payload.wave import _ragged

LENGTHS = spread(128)  # 64-191 new tokens: the off state serves the whole wave faster


def drain(state: PolicyState, forget: bool = False, overlap: bool = False) -> list[Decision]:
    """The decisions on a wave of :data:`LENGTHS` arriving on an idle server at step 100 and
    its results, each request one token a result while off (speculating, the accept mean),
    none joining; with ``forget``, the wave's lengths forgotten after its arrival (the steps'
    rule alone: ``tail_lengths`` empty, as where requests not of the wave run); with
    ``overlap``, a result's batch holds the requests the result before ended too (SGLang's
    overlap scheduler runs them once more)."""
    policy = CalibratedPolicy(CALIBRATED)
    state, decision = policy.advance(state, wave_arrival(LENGTHS, spec_on=True))
    assert (decision.spec_on, decision.reason) == (False, Reason.COHORT)
    state = replace(state, tail_lengths=()) if forget else state
    decisions, spec_on, made, before, step = [decision], False, 1.0, 1.0, 100
    while running := sum(1 for n in LENGTHS if n > made):
        batch = sum(1 for n in LENGTHS if n > before) if overlap else running
        accepts = (3.4,) * batch if spec_on else None
        obs = Observation(step, batch, accepts, spec_on, seconds(batch, spec_on))
        state, decision = policy.advance(state, obs)
        decisions.append(decision)
        before, made = made, made + (3.4 if spec_on else 1.0)
        spec_on, step = decision.spec_on, step + 1
    return decisions


def switched_on(decisions: list[Decision]) -> list[Decision]:
    return [d for d in decisions if d.changed and d.spec_on]


def test_a_switch_the_tail_cannot_pay_for_is_not_made() -> None:
    """A switch measured at 40 plain steps: the steps' rule would switch on in the tail
    (speculation's step wins below 64 requests), what is left of the wave never repays it."""
    dear = replace(state_with((16, 32, 64, 128)), switch_fit=fold_cost((), 40, 40.0))
    held = drain(dear)
    assert not switched_on(held)
    assert any(d.reason is Reason.TAIL for d in held)
    # the same stream with the tail unknown: the steps' rule switches on
    assert [d.reason for d in switched_on(drain(dear, forget=True))] == [Reason.MEASURED]


def test_the_requests_the_overlap_scheduler_runs_once_more_leave_the_tail_known(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Live (call 61's trace, every wave): a result's batch held the requests that ended on
    the result before. Counted in one result only (``OVERLAP = 1``), the batch exceeded the
    wave's requests left wherever a request ended, and the rule stood aside: the steps' rule
    switched on where the tail could not repay it."""
    dear = replace(state_with((16, 32, 64, 128)), switch_fit=fold_cost((), 40, 40.0))
    held = drain(dear, overlap=True)
    assert not switched_on(held) and any(d.reason is Reason.TAIL for d in held)
    monkeypatch.setattr(tail, "OVERLAP", 1)
    assert [d.reason for d in switched_on(drain(dear, overlap=True))] == [Reason.MEASURED]


def test_a_switch_the_tail_pays_for_is_made_where_the_steps_make_it() -> None:
    """A switch of 2 plain steps: the tail of 40-odd requests repays it many times over, and
    the switch comes at the step the steps' rule alone would take."""
    cheap = replace(state_with((16, 32, 64, 128)), switch_fit=fold_cost((), 40, 2.0))
    made, stepwise = switched_on(drain(cheap)), switched_on(drain(cheap, forget=True))
    assert made and [(d.step, d.reason) for d in made] == [(d.step, d.reason) for d in stepwise]


def test_requests_joining_a_wave_forget_its_tail_and_the_state_keeps_it() -> None:
    policy = CalibratedPolicy(CALIBRATED)
    arrived, _ = policy.advance(state_with((16, 32, 64, 128)), wave_arrival(LENGTHS, True))
    assert arrived.tail_lengths == LENGTHS and arrived.wave_at == 100
    assert PolicyState.from_dict(arrived.to_dict()) == arrived  # a trace replays it
    joined = Observation(150, 256, None, False, arriving=130)  # 126 of the wave still run
    after, _ = policy.advance(replace(arrived, last_step=149), joined)
    assert after.tail_lengths == ()


def test_a_kept_switch_is_judged_again_only_when_a_quarter_of_the_tail_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The wave model costs the hook a fifth of a step and more a judgment: a tail is judged
    where a switch is first kept, then each time the requests running fell to 3/4."""
    judged: list[int] = []
    real = tail.pays_in_tail

    def counted(config, state, batch_size, step, to_on):  # type: ignore[no-untyped-def]
        judged.append(batch_size)
        return real(config, state, batch_size, step, to_on)

    monkeypatch.setattr(tail, "pays_in_tail", counted)
    dear = replace(state_with((16, 32, 64, 128)), switch_fit=fold_cost((), 40, 40.0))
    kept = [d for d in drain(dear) if d.reason is Reason.TAIL]
    assert len(kept) > 3 * len(judged) > 0
    assert all(later <= 0.75 * before for before, later in pairwise(judged))


def speculating_wave(fit_steps: float, forget: bool = False) -> list[Decision]:
    """The decisions on a wave of 32 requests of 128 tokens running speculating from step 100
    with a draft of 1.8 tokens a verify, where the off state's step is the faster by the goodput
    (1.8 tokens in 10 ms against one in 4.9 ms) and a switch costs ``fit_steps`` plain steps;
    with ``forget``, the wave's lengths unknown (the steps' rule alone)."""
    cal = Calibration()
    for size, on, period in ((32, True, 0.0100), (32, False, 0.0049), (16, True, 0.0075),
                             (16, False, 0.0046)):  # fmt: skip
        for step in range(10):
            cal = fold(cal, step, size, on, period, 16)
    state = PolicyState(
        last_step=99, last_toggle_step=0, accept_mean=1.8, accept_samples=40, calibration=cal,
        wave_at=100, tail_lengths=() if forget else (128,) * 32, tail_made=1.0,
        switch_fit=fold_cost((), 32, fit_steps),
    )  # fmt: skip
    policy, decisions, made, step, spec_on = CalibratedPolicy(CALIBRATED), [], 1.0, 100, True
    while made < 128:
        obs = Observation(step, 32, (1.8,) * 32 if spec_on else None, spec_on,
                          0.0100 if spec_on else 0.0049)  # fmt: skip
        state, decision = policy.advance(state, obs)
        decisions.append(decision)
        made += 1.8 if spec_on else 1.0
        spec_on, step = decision.spec_on, step + 1
    return decisions


def test_a_switch_off_is_left_to_the_steps_rule_even_where_the_tail_cannot_repay_it() -> None:
    """A switch of 40 plain steps (196 ms) against speculating on: the wave would end in 71
    verifies (710 ms) kept on, in 196 ms + 127 plain steps (818 ms) switched. The tail's model
    would keep it on; but a switch off is what the steps' rule makes where speculation's
    measured steps ran slower than the model has them (simulated slow turns: judged by the
    model, the fair draft spread at 128 lost 7.5%), so it goes ahead, as with the tail unknown."""
    for switched in (speculating_wave(40.0), speculating_wave(40.0, forget=True)):
        assert [(d.step, d.spec_on, d.reason) for d in switched if d.changed] == [
            (100, False, Reason.MEASURED)
        ]
        assert len(switched) == 127


def _ragged_reference(cal: Calibration, accept: float, spread: float, known: list[int]) -> float:
    """wave._ragged as first written: every group at every step."""
    sd = math.sqrt(spread / accept**3)
    extra = (spread + accept * accept) / (2.0 * accept * accept) - 0.5 / accept
    groups = [(n / accept + extra, sd * math.sqrt(n), len(list(g))) for n, g in groupby(known)]
    end = max(mu + 5.0 * sigma for mu, sigma, _ in groups)
    seconds, x = 0.0, 0.5
    while x < end:
        left, none_left = 0.0, 1.0
        for mu, sigma, count in groups:
            done = 0.5 * math.erfc((mu - x) / (sigma * math.sqrt(2.0)))
            left += count * (1.0 - done)
            none_left *= done**count
        running = 1.0 - none_left
        if running <= 0.0:
            break
        on = predict(cal, True, max(1, round(left / running)), CALIBRATED.min_samples)
        assert on is not None
        seconds += running * on.seconds
        x += 1.0
    return seconds


@pytest.mark.parametrize("seed", range(6))
def test_the_ragged_end_leaves_out_only_the_groups_done_for_good(seed: int) -> None:
    """_ragged skips the groups whose chance of having finished is exactly 1 (the hook's time):
    the same float as summing every group at every step."""
    rng = random.Random(seed)
    cal = state_with((1, 2, 4, 8, 16, 32, 64, 128)).calibration
    assert cal is not None
    low = rng.randint(1, 100)
    known = sorted(rng.randint(low, low + 200) for _ in range(rng.choice((4, 16, 64, 128))))
    accept, spread = rng.uniform(1.1, 4.0), rng.uniform(0.05, 2.0)
    found = _ragged(CALIBRATED, cal, accept, spread, known)
    assert found == _ragged_reference(cal, accept, spread, known)
