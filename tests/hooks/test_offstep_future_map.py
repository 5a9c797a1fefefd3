"""The lean off step's future-map and mamba parts (``sgtrace.payload.offstep``) against fakes.

The fake ``FutureMap`` follows SGLang 0.5.16's contract (``managers/overlap_utils.py``): each
step ``stash`` writes a step's bonus tokens and draft fields into per-request rows, the next
step's ``_resolve_spec_extras`` gathers them back by the draft input's ``future_indices``; the
scheduler module calls ``resolve_forward_inputs(batch, future_map)`` before every forward.
"""

from __future__ import annotations

import logging
import sys
import types
from typing import Any

import pytest
from tests.hooks.test_offstep import greedy_batch, module, upstream

from sgtrace.payload import offstep, offstep_check

__all__ = ["upstream"]  # the fixture, shared with test_offstep.py

SCHEDULER = """
def resolve_forward_inputs(batch, future_map):
    future_map._resolve_spec_extras(batch)
"""


class FutureMap:
    """Rows per request pool slot, as upstream's (gather on resolve, scatter on stash)."""

    def __init__(self, torch: Any, bonus_dtype: str = "int64") -> None:
        self.torch = torch
        self.device = "cuda"
        self.need_topk = True
        self.draft_probs_buf = None
        self.dsa_topk_indices_buf = None
        self.spec_algo = types.SimpleNamespace(is_ngram=lambda: False)
        self._forward_buf_initialized = True
        self.output_tokens_buf = torch.Tensor([5, 6, 7, 8], torch.int64)
        self.topk_p_buf = torch.Tensor([[0.5], [0.25], [0.125], [1.0]], torch.float32)
        self.topk_index_buf = torch.Tensor([[1], [2], [3], [4]], torch.int64)
        self.hidden_states_buf = torch.Tensor([[1, 1, 1], [2, 2, 2], [3, 3, 3], [4, 4, 4]])
        self.bonus_dtype = bonus_dtype
        self.calls: list[str] = []

    def _resolve_spec_extras(self, batch: Any) -> None:
        self.calls.append("resolve")
        draft, rows = batch.spec_info, batch.spec_info.future_indices
        draft.topk_p = self.topk_p_buf[rows]
        draft.topk_index = self.topk_index_buf[rows]
        draft.bonus_tokens = self.output_tokens_buf[rows].to(self.bonus_dtype)
        draft.hidden_states = self.hidden_states_buf[rows]
        draft.dsa_topk_indices = None

    def stash(self, indices: Any, payload: Any) -> None:
        self.calls.append("stash")
        self.output_tokens_buf[indices] = payload.bonus_tokens.to(self.output_tokens_buf.dtype)
        self.topk_p_buf[indices] = payload.topk_p
        self.topk_index_buf[indices] = payload.topk_index
        self.hidden_states_buf[indices] = payload.hidden_states


def draft_batch(torch: Any, rows: list[int]) -> types.SimpleNamespace:
    info = types.SimpleNamespace(
        future_indices=torch.Tensor(rows),
        future_dsa_topk_indices_available=False,
        dsa_topk_indices=None,
        topk_p="stale",
    )
    return types.SimpleNamespace(spec_info=info)


@pytest.fixture
def off(upstream: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """The worker held in the zero-step state, a scheduler module and its future map."""
    scheduler = module("fake_scheduler", SCHEDULER)
    monkeypatch.setitem(sys.modules, "fake_scheduler", scheduler)
    upstream.worker.adaptive_controller = types.SimpleNamespace(target_steps=0)
    step = offstep.install_lean_off_step(
        upstream.worker, logging.getLogger("test"), "fake_scheduler"
    )
    assert step is not None
    return types.SimpleNamespace(
        **vars(upstream), scheduler=scheduler, step=step, future_map=FutureMap(upstream.torch)
    )


def stub_payload(off: types.SimpleNamespace, bonus: list[int]) -> types.SimpleNamespace:
    """What the scheduler stashes after a cold off step: its bonus tokens and the stubs."""
    torch = off.torch
    output = types.SimpleNamespace(next_draft_input=types.SimpleNamespace())
    off.worker._stub_skipped_draft_extend(greedy_batch(torch, bs=len(bonus)), output)
    return types.SimpleNamespace(
        bonus_tokens=torch.Tensor(bonus, torch.int32),
        draft_probs=None,
        dsa_topk_indices=None,
        **vars(output.next_draft_input),
    )


def test_a_step_that_stays_off_relays_only_its_bonus_tokens(
    off: types.SimpleNamespace, caplog: pytest.LogCaptureFixture
) -> None:
    torch, scheduler, future_map = off.torch, off.scheduler, off.future_map
    caplog.set_level(logging.INFO, logger="test")
    assert scheduler.resolve_forward_inputs == off.step.adopt
    for n in range(offstep_check.CHECKS + 2):
        batch = draft_batch(torch, [2, 0])
        scheduler.resolve_forward_inputs(batch, future_map)
        # found the map on its first call and gave the function back
        assert scheduler.resolve_forward_inputs.__name__ == "resolve_forward_inputs"
        assert batch.spec_info.bonus_tokens.rows == [7, 5]
        assert batch.spec_info.bonus_tokens.dtype == "int64"
        assert future_map.calls.count("resolve") == min(n + 1, offstep_check.CHECKS)
        if (
            n >= offstep_check.CHECKS
        ):  # trusted: the draft's top-k and hidden state are not gathered
            assert batch.spec_info.topk_p == "stale"
    assert "FutureMap" in off.step.parts
    future_map.calls.clear()
    for n in range(offstep_check.CHECKS + 2):
        future_map.topk_p_buf.rows[2] = [0.75]
        future_map.stash(torch.Tensor([2, 0]), stub_payload(off, [11 + n, 12 + n]))
        assert future_map.output_tokens_buf.rows == [12 + n, 6, 11 + n, 8]
        assert future_map.calls.count("stash") == min(n + 1, offstep_check.CHECKS)
    assert future_map.topk_p_buf.rows[2] == [0.75]  # the stub row was not written
    assert "equal upstream's (future map)" in caplog.text
    fresh = types.SimpleNamespace(
        **{**vars(stub_payload(off, [1, 2])), "topk_p": torch.zeros((2, 1))}
    )
    future_map.stash(torch.Tensor([2, 0]), fresh)  # a real draft's fields: upstream stashes them
    assert future_map.calls[-1] == "stash" and future_map.topk_p_buf.rows[2] == [0]
    off.step.close()
    assert "stash" not in vars(future_map) and "_resolve_spec_extras" not in vars(future_map)


def test_a_step_that_may_switch_gets_upstream_s_relay(off: types.SimpleNamespace) -> None:
    torch, future_map, step = off.torch, off.future_map, off.step
    off.scheduler.resolve_forward_inputs(draft_batch(torch, [1]), future_map)
    step.checks = dict.fromkeys(offstep_check.PARTS, 0)  # trusted: upstream runs only where it must
    future_map.calls.clear()
    cases = [
        (off.worker.adaptive_controller, "target_steps", 3),  # on at this launch
        (off.worker, "speculative_num_steps", 3),  # on now
    ]
    for target, name, value in cases:
        before = getattr(target, name)
        setattr(target, name, value)
        batch = draft_batch(torch, [1, 3])
        future_map._resolve_spec_extras(batch)
        assert future_map.calls == ["resolve"] and batch.spec_info.topk_p.rows == [[0.25], [1.0]]
        future_map.calls.clear()
        setattr(target, name, before)


def test_a_richer_map_keeps_upstream_s_relay(off: types.SimpleNamespace) -> None:
    richer = FutureMap(off.torch)
    richer.draft_probs_buf = off.torch.zeros((4, 1))  # relays more than top-k
    batch = draft_batch(off.torch, [1, 3])
    off.scheduler.resolve_forward_inputs(batch, richer)
    assert "_resolve_spec_extras" not in vars(richer) and "FutureMap" not in off.step.parts
    assert richer.calls == ["resolve"] and batch.spec_info.topk_p.rows == [[0.25], [1.0]]


def test_a_difference_in_the_relay_hands_it_back_to_upstream(
    upstream: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "fake_scheduler", module("fake_scheduler", SCHEDULER))
    upstream.worker.adaptive_controller = types.SimpleNamespace(target_steps=0)
    step = offstep.install_lean_off_step(
        upstream.worker, logging.getLogger("test"), "fake_scheduler"
    )
    assert step is not None
    future_map = FutureMap(upstream.torch, bonus_dtype="int32")  # upstream's bonus as int32
    sys.modules["fake_scheduler"].resolve_forward_inputs(
        draft_batch(upstream.torch, [0]), future_map
    )
    assert step.relay_failed and not step.failed  # the rest of the lean step goes on
    future_map.calls.clear()
    batch = draft_batch(upstream.torch, [0])
    future_map._resolve_spec_extras(batch)
    assert future_map.calls == ["resolve"] and batch.spec_info.bonus_tokens.dtype == "int32"


def test_the_mamba_check_is_asked_once_and_only_while_off(upstream: types.SimpleNamespace) -> None:
    common, worker = upstream.common, upstream.worker
    step = offstep.install_lean_off_step(worker, logging.getLogger("test"))
    assert step is not None and "commit_mamba_states_after_verify" in step.parts
    plain = types.SimpleNamespace(model_runner=types.SimpleNamespace(model_config="dense"))
    hybrid = types.SimpleNamespace(model_runner=types.SimpleNamespace(model_config="hybrid"))
    common.MAMBA.append("hybrid")
    for _ in range(3):
        common.commit_mamba_states_after_verify(plain, None, None, None, 1)
    assert common.COMMITS == []  # upstream returns at once for a target without mamba state
    common.commit_mamba_states_after_verify(hybrid, None, None, None, 1)
    worker.speculative_num_steps = 3
    common.commit_mamba_states_after_verify(plain, None, None, None, 4)
    assert common.COMMITS == [hybrid, plain]
    step.close()
    assert common.commit_mamba_states_after_verify.__name__ == "commit_mamba_states_after_verify"
