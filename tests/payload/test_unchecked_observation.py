"""The hook builds its per-step observation unchecked (``frozen.build``: its own counters,
clock and ``facts.accept_lengths``); everyone else's is checked."""

from __future__ import annotations

import dataclasses
import math
import types

import pytest
from tests.payload.payload_support import hook_config
from tests.payload.plain_fakes import Req

from sgtrace.payload.facts import accept_lengths
from sgtrace.payload.frozen import build
from sgtrace.payload.hook import Hook
from sgtrace.payload.policy import Observation, PolicyConfig, PolicyKind


def test_an_observation_is_checked_where_made_and_the_hooks_equals_a_checked_one() -> None:
    with pytest.raises(ValueError, match="accept lengths must be numbers >= 1.0"):
        Observation(step=1, batch_size=1, accept_lengths=(0.5,), spec_on=True)
    unchecked = build(Observation, step=1, batch_size=1, accept_lengths=(0.5,), spec_on=True)
    assert unchecked.accept_lengths == (0.5,)  # taken as given
    checked = Observation(step=1, batch_size=1, accept_lengths=(2.0,), spec_on=True)
    same = build(Observation, step=1, batch_size=1, accept_lengths=(2.0,), spec_on=True)
    assert checked == same and repr(checked) == repr(same) and checked.to_dict() == same.to_dict()
    with pytest.raises(ValueError):  # replace checks again
        dataclasses.replace(unchecked, step=2)


def _result(lens: list[float]) -> types.SimpleNamespace:
    return types.SimpleNamespace(speculative_num_draft_tokens=4, accept_lens=lens)


def test_accept_lengths_drop_what_no_verify_made_and_refuse_an_infinite_one() -> None:
    assert accept_lengths(_result([3.0, 0.0, math.nan, 2.0])) == (3.0, 2.0)
    assert accept_lengths(_result([0.0])) is None
    with pytest.raises(ValueError, match="finite"):
        accept_lengths(_result([2.0, math.inf]))


def test_an_infinite_accept_length_stops_the_hook_as_a_checked_one_would() -> None:
    hook = Hook(hook_config(PolicyConfig(kind=PolicyKind.CALIBRATED)))
    hook.carrier.post = lambda record: None  # type: ignore[method-assign]
    hook.worker, hook.rank = object(), 0
    batch = types.SimpleNamespace(reqs=[Req("a")], forward_iter=1)
    hook.guarded("on_decode_result", hook.on_decode_result, batch, _result([3.0]))
    assert not hook.failed and hook.step == 1
    batch.forward_iter = 2
    hook.guarded("on_decode_result", hook.on_decode_result, batch, _result([math.inf]))
    assert hook.failed and hook.step == 1  # no decision taken on it
