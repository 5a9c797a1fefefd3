"""The hook on requests arriving: it counts the new generation requests a loop iteration
received and asks the policy only where they grow the batch into a larger bucket."""

from __future__ import annotations

import types

from tests.payload.payload_support import hook_config
from tests.payload.plain_fakes import Req

from sgtrace.payload.facts import count_lengths, generate_requests, unfinished
from sgtrace.payload.hook import Hook
from sgtrace.payload.policies import make_policy
from sgtrace.payload.policy import Decision, Observation, PolicyConfig, PolicyKind, Reason


class TokenizedGenerateReqInput:
    pass


class BatchTokenizedGenerateReqInput:
    def __init__(self, n: int) -> None:
        self.batch = [TokenizedGenerateReqInput() for _ in range(n)]


class AbortReq:
    pass


def test_new_generation_requests_are_counted_by_their_class_and_batches_by_their_items() -> None:
    received = [TokenizedGenerateReqInput(), BatchTokenizedGenerateReqInput(3), AbortReq()]
    assert generate_requests(received) == 4
    assert generate_requests(None) == 0  # a rank that received nothing
    reqs = [Req("a"), Req("b", done=True), object()]  # without finished(): running
    assert unfinished(reqs) == 2


class Asked:
    """A policy that decides on arrivals and says what it was shown."""

    decides_arrivals = True

    def __init__(self) -> None:
        self.seen: list[Observation] = []
        self.config = PolicyConfig()

    def decide(self, obs: Observation) -> Decision:
        self.seen.append(obs)
        return Decision(False, obs.spec_on, Reason.ARRIVAL, obs.step, obs.batch_size, 0, None)


def test_the_policy_is_asked_where_arrivals_grow_the_batch_into_a_larger_bucket() -> None:
    hook = Hook(hook_config(PolicyConfig(kind=PolicyKind.CALIBRATED)))
    hook.worker, hook.policy = object(), Asked()  # type: ignore[assignment]
    posted: list[object] = []
    hook.carrier.post = posted.append  # type: ignore[method-assign]
    hook.step, hook.running, hook.last_batch = 7, 3, 4  # a result of 4, 3 still running
    hook.arrive([TokenizedGenerateReqInput()])  # 4 in the batch: bucket 4, as the last
    assert hook.policy.seen == []  # type: ignore[attr-defined]
    hook.arrive([BatchTokenizedGenerateReqInput(2)])  # 6: bucket 8
    [obs] = hook.policy.seen  # type: ignore[attr-defined]
    assert (obs.step, obs.batch_size, obs.arriving, obs.spec_on) == (7, 6, 2, True)
    [record] = posted
    assert (record.arriving, record.changed, record.spec_on, record.reason) == (
        2,
        True,
        False,
        "arrival",
    )  # type: ignore[attr-defined]
    assert hook.spec_on is False
    hook.arrive([AbortReq()])  # nothing new: not asked
    assert len(hook.policy.seen) == 1  # type: ignore[attr-defined]


def test_a_result_sets_what_the_next_arrivals_are_compared_with() -> None:
    hook = Hook(hook_config(PolicyConfig(kind=PolicyKind.CALIBRATED)))
    hook.carrier.post = lambda record: None  # type: ignore[method-assign]
    hook.worker = object()
    batch = types.SimpleNamespace(reqs=[Req("a", done=True), Req("b")], forward_iter=3)
    hook.on_decode_result(batch, types.SimpleNamespace(accept_lens=None))
    assert (hook.running, hook.arrived, hook.last_batch) == (1, 0, 2)


def test_a_policy_that_does_not_decide_on_arrivals_is_not_asked() -> None:
    hook = Hook(hook_config(PolicyConfig(kind=PolicyKind.THRESHOLD)))
    posted: list[object] = []
    hook.carrier.post = posted.append  # type: ignore[method-assign]
    hook.worker, hook.last_batch = object(), 1
    hook.arrive([BatchTokenizedGenerateReqInput(40)])
    assert posted == [] and hook.decisions.entries == ()


class Params:
    def __init__(self, tokens: int, ignore_eos: bool = True) -> None:
        self.max_new_tokens, self.ignore_eos = tokens, ignore_eos


class SizedTokenizedGenerateReqInput(TokenizedGenerateReqInput):
    """A generation request as the scheduler receives it: its sampling parameters."""

    def __init__(self, tokens: int, ignore_eos: bool = True) -> None:
        self.sampling_params = Params(tokens, ignore_eos)


def test_requests_that_finish_by_length_are_counted_by_their_length() -> None:
    counts: dict[int, int] = {}
    batch = BatchTokenizedGenerateReqInput(0)
    batch.batch = [SizedTokenizedGenerateReqInput(64), SizedTokenizedGenerateReqInput(64)]  # type: ignore[list-item]
    received = [
        SizedTokenizedGenerateReqInput(64),
        SizedTokenizedGenerateReqInput(128),
        SizedTokenizedGenerateReqInput(64, ignore_eos=False),
        batch,
        AbortReq(),
    ]
    count_lengths(received, counts)
    count_lengths(None, counts)  # a rank that received nothing
    assert counts == {64: 3, 128: 1}  # the one that may stop at its end of sequence: none


def test_a_cohort_is_told_where_it_grows_into_a_larger_bucket_though_the_batch_does_not() -> None:
    hook = Hook(hook_config(PolicyConfig(kind=PolicyKind.CALIBRATED)))
    hook.worker, hook.policy = object(), Asked()  # type: ignore[assignment]
    hook.carrier.post = lambda record: None  # type: ignore[method-assign]
    hook.step, hook.running, hook.last_batch = 9, 0, 32  # a round of 32 just finished, in step
    hook.arrive(
        [SizedTokenizedGenerateReqInput(64) for _ in range(3)]
    )  # 3 of one length: no cohort yet
    assert hook.policy.seen == []  # type: ignore[attr-defined]
    hook.arrive(
        [SizedTokenizedGenerateReqInput(64), SizedTokenizedGenerateReqInput(100)]
    )  # 4 of 64 tokens: a cohort
    hook.arrive([SizedTokenizedGenerateReqInput(64) for _ in range(3)])  # 7: bucket 8
    hook.arrive(
        [SizedTokenizedGenerateReqInput(64) for _ in range(25)]
    )  # 32: bucket 32, and 33 requests
    seen = [(o.batch_size, o.arriving, o.cohort, o.cohort_tokens) for o in hook.policy.seen]  # type: ignore[attr-defined]
    assert seen == [(5, 2, 4, 64), (8, 3, 7, 64), (33, 25, 32, 64)]
    hook.policy = make_policy(PolicyConfig(kind=PolicyKind.CALIBRATED))
    batch = types.SimpleNamespace(reqs=[Req("a")], forward_iter=4)
    hook.on_decode_result(batch, types.SimpleNamespace(accept_lens=None))
    assert (hook.lengths, hook.told) == ({}, 0)  # the next gap counts afresh


def test_a_wave_is_told_once_with_its_lengths_where_it_makes_half_the_batch() -> None:
    hook = Hook(hook_config(PolicyConfig(kind=PolicyKind.CALIBRATED)))
    hook.worker, hook.policy = object(), Asked()  # type: ignore[assignment]
    hook.carrier.post = lambda record: None  # type: ignore[method-assign]
    hook.step, hook.running, hook.last_batch = 9, 0, 64  # the last wave of 64 just finished
    hook.arrive([SizedTokenizedGenerateReqInput(64 + 2 * i) for i in range(3)])  # 3: no wave
    assert hook.policy.seen == []  # type: ignore[attr-defined]
    hook.arrive([SizedTokenizedGenerateReqInput(64 + 2 * i) for i in range(3, 6)])
    hook.arrive([SizedTokenizedGenerateReqInput(200)])  # told already, in the same bucket
    [obs] = hook.policy.seen  # type: ignore[attr-defined]
    assert (obs.batch_size, obs.arriving, obs.cohort) == (6, 3, 0)  # no length twice
    assert obs.wave_lengths == (64, 66, 68, 70, 72, 74)
    batch = types.SimpleNamespace(reqs=[Req("a")], forward_iter=4)
    hook.policy = make_policy(PolicyConfig(kind=PolicyKind.CALIBRATED))
    hook.on_decode_result(batch, types.SimpleNamespace(accept_lens=None))
    assert (hook.lengths, hook.waved) == ({}, False)  # the next gap counts afresh
