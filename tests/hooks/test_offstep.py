"""The lean off step (``sgtrace.payload.offstep``) against fake upstream functions of the same shape.

The fakes are written here, after SGLang 0.5.16's contracts (``eagle_sample`` returns
``predict, accept_lens, accept_index`` with the bonus token counted; ``fill_bonus_tokens_func``
reads ``accept_tokens[i * stride + accept_lens[i] - 1]``), on the list-backed ``fake_torch``.
Live: ``bench/live/sweep.sh`` kinds ``hookcold`` (lean) and ``hookcoldup`` (upstream's step).
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import sys
import types
from typing import Any

import pytest
from tests.hooks import fake_torch
from tests.payload.payload_support import switching_config

from sgtrace.payload import offstep, offstep_check
from sgtrace.payload.config import HookOptions, OffStep
from sgtrace.payload.hook import Hook
from sgtrace.payload.policy import PolicyConfig

COMMON = '''
import torch
CALLS = []

def eagle_sample(verify_input, batch, logits_output, vocab_mask=None):
    """Greedy chain verification, as the tree kernel does for topk 1."""
    CALLS.append("sample")
    bs, n = len(batch.seq_lens), verify_input.draft_token_num
    target = torch.argmax(logits_output.next_token_logits, dim=-1).reshape(bs, n).rows
    candidates = verify_input.draft_token.reshape(bs, n).rows
    predict = [0] * (bs * n)
    index = [[-1] * n for _ in range(bs)]
    lens = []
    for i in range(bs):
        k = 0
        while k + 1 < n and candidates[i][k + 1] == target[i][k]:
            predict[i * n + k] = target[i][k]
            index[i][k] = i * n + k
            k += 1
        predict[i * n + k] = target[i][k]
        index[i][k] = i * n + k
        lens.append(k + 1)
    return torch.Tensor(predict, torch.int32), torch.Tensor(lens, torch.int32), torch.Tensor(
        index, torch.int32
    )

def fill_bonus_tokens_func(accept_tokens, accept_lens, bonus_tokens, accept_stride, batch_size):
    CALLS.append("bonus")
    flat = accept_tokens.flat()
    for i in range(batch_size):
        bonus_tokens.rows[i] = flat[accept_stride * i + accept_lens.rows[i] - 1]

def run_eagle_verify(batch, **kwargs):
    return None

MAMBA = []  # the targets with mamba-style state (by model config)
COMMITS = []

def mambaish_config(model_config):
    return model_config if model_config in MAMBA else None

def commit_mamba_states_after_verify(target_worker, batch, accept_lens, accept_index, n):
    COMMITS.append(target_worker)
    if mambaish_config(target_worker.model_runner.model_config) is None:
        return
'''

WORKER = """
import torch
CALLS = []

def get_draft_recurrent_hidden_state_spec(runner):
    return runner.hidden_size, torch.bfloat16

class EAGLEWorkerV2:
    def forward_batch_generation(self, batch, on_publish=None):
        return None

    def verify(self, batch):
        return run_eagle_verify(batch)

    def _build_trivial_verify_input(self, batch):
        CALLS.append("trivial_input")
        bs = batch.seq_lens.shape[0]
        mask_buf, position_buf = (
            self._target_worker.model_runner.attn_backend.get_verify_buffers_to_fill_after_draft()
        )
        mask_buf.fill_(True)
        return EagleVerifyInput(
            draft_token=batch.spec_info.bonus_tokens,
            custom_mask=mask_buf,
            positions=batch.seq_lens.to(torch.int64),
            retrieve_index=torch.arange(bs, dtype=torch.long).unsqueeze(1),
            retrieve_next_token=torch.full((bs, 1), -1, dtype=torch.long),
            retrieve_next_sibling=torch.full((bs, 1), -1, dtype=torch.long),
            retrieve_cum_len=None,
            spec_steps=0,
            topk=self.topk,
            draft_token_num=1,
            capture_hidden_mode=CaptureHiddenMode.FULL,
            seq_lens_sum=None,
            seq_lens_cpu=None,
        )

    def _stub_skipped_draft_extend(self, batch, batch_output):
        CALLS.append("stubs")
        bs = batch.seq_lens.shape[0]
        out = batch_output.next_draft_input
        out.topk_p = torch.zeros((bs, self.topk), dtype=torch.float32)
        out.topk_index = torch.zeros((bs, self.topk), dtype=torch.int64)
        size, dtype = get_draft_recurrent_hidden_state_spec(self.draft_worker.draft_runner)
        out.hidden_states = torch.zeros((bs, size), dtype=dtype)
"""


class CaptureHiddenMode(enum.Enum):
    NULL = 0
    FULL = 1


@dataclasses.dataclass
class EagleVerifyInput:
    draft_token: Any
    custom_mask: Any
    positions: Any
    retrieve_index: Any
    retrieve_next_token: Any
    retrieve_next_sibling: Any
    retrieve_cum_len: Any
    spec_steps: int
    topk: int
    draft_token_num: int
    capture_hidden_mode: CaptureHiddenMode
    seq_lens_sum: Any
    seq_lens_cpu: Any
    grammar: Any = None

    @property
    def tree_topk(self) -> int:
        return self.topk


class Mode:
    def __init__(self, idle: bool = False) -> None:
        self.idle = idle

    def is_idle(self) -> bool:
        return self.idle


def module(name: str, code: str, **names: Any) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(names)
    exec(compile(code, f"<{name}>", "exec"), mod.__dict__)
    return mod


@pytest.fixture
def upstream(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """Fake upstream modules, a worker of their class and ``torch`` in ``sys.modules``."""
    torch = fake_torch.module()
    monkeypatch.setitem(sys.modules, "torch", torch)
    # upstream's sampling switches, as upstream read them from its environment: both off
    switches = types.SimpleNamespace(SGLANG_SANITIZE_NAN_LOGITS=types.SimpleNamespace(get=bool))
    spec_utils = module(offstep_check.SPEC_UTILS, "SIMULATE_ACC_LEN = -1.0")
    monkeypatch.setitem(sys.modules, offstep_check.SPEC_UTILS, spec_utils)
    probe = module(offstep_check.ASYNC_PROBE, "", envs=switches)
    monkeypatch.setitem(sys.modules, offstep_check.ASYNC_PROBE, probe)
    common = module("fake_common", COMMON)
    mod = module(
        "fake_worker",
        WORKER,
        run_eagle_verify=common.run_eagle_verify,
        EagleVerifyInput=EagleVerifyInput,
        CaptureHiddenMode=CaptureHiddenMode,
    )
    worker = mod.EAGLEWorkerV2()
    worker.topk, worker.device, worker.speculative_num_steps = 1, "cuda", 0
    mask = torch.Tensor([False] * 4, "bool")
    backend = types.SimpleNamespace(get_verify_buffers_to_fill_after_draft=lambda: (mask, None))
    worker._target_worker = types.SimpleNamespace(
        model_runner=types.SimpleNamespace(attn_backend=backend)
    )
    worker.draft_worker = types.SimpleNamespace(draft_runner=types.SimpleNamespace(hidden_size=3))
    return types.SimpleNamespace(
        torch=torch, common=common, mod=mod, worker=worker, spec_utils=spec_utils
    )


def greedy_batch(torch: Any, bs: int = 2, **info: Any) -> types.SimpleNamespace:
    sampling = {"is_all_greedy": True, "acc_additive_penalties": None}
    sampling.update({"acc_scaling_penalties": None, "logit_bias": None, **info})
    return types.SimpleNamespace(
        seq_lens=torch.Tensor([10 + i for i in range(bs)], torch.int64),
        forward_mode=Mode(),
        sampling_info=types.SimpleNamespace(**sampling),
        spec_info=types.SimpleNamespace(bonus_tokens=torch.Tensor([7, 9, 4][:bs], torch.int32)),
    )


def logits(torch: Any, winners: list[int], vocab: int = 6) -> types.SimpleNamespace:
    rows = [[1.0 if v == w else 0.0 for v in range(vocab)] for w in winners]
    return types.SimpleNamespace(next_token_logits=torch.Tensor(rows, "float32"))


def one_token_step(up: types.SimpleNamespace, batch: Any, winners: list[int]) -> tuple:
    """The zero-step decode step's host side through the (possibly replaced) parts."""
    verify_input = up.worker._build_trivial_verify_input(batch)
    predict, lens, index = up.common.eagle_sample(verify_input, batch, logits(up.torch, winners))
    bonus = up.torch.empty_like(lens, dtype=up.torch.int32)
    up.common.fill_bonus_tokens_func(
        predict.reshape(len(winners), 1), lens, bonus, index.shape[1], len(winners)
    )
    output = types.SimpleNamespace(next_draft_input=types.SimpleNamespace())
    up.worker._stub_skipped_draft_extend(batch, output)
    return verify_input, predict, lens, index, bonus, output.next_draft_input


def test_the_lean_step_computes_what_upstream_does_then_stops_asking_upstream(
    upstream: types.SimpleNamespace, caplog: pytest.LogCaptureFixture
) -> None:
    torch = upstream.torch
    want = one_token_step(upstream, greedy_batch(torch), [3, 5])
    upstream.common.CALLS.clear()
    upstream.mod.CALLS.clear()
    caplog.set_level(logging.INFO, logger="test")
    step = offstep.install_lean_off_step(upstream.worker, logging.getLogger("test"))
    assert step is not None
    assert step.parts == [
        "eagle_sample",
        "fill_bonus_tokens_func",
        "_build_trivial_verify_input",
        "_stub_skipped_draft_extend",
        "commit_mamba_states_after_verify",
    ]
    for n in range(offstep_check.CHECKS + 3):
        verify_input, predict, lens, index, bonus, stubs = one_token_step(
            upstream, greedy_batch(torch), [3, 5]
        )
        assert vars(verify_input).keys() == vars(want[0]).keys()
        assert verify_input.retrieve_index.rows == [[0], [1]]
        assert verify_input.positions.rows == [10, 11]
        assert (predict.rows, lens.rows, index.rows) == ([3, 5], [1, 1], [[0], [1]])
        assert (predict.dtype, lens.dtype, index.dtype) == ("int32",) * 3
        assert bonus.rows == want[4].rows == [3, 5]
        assert stubs.hidden_states.shape == (2, 3) and stubs.topk_p.rows == [[0], [0]]
        calls = upstream.common.CALLS + upstream.mod.CALLS
        # upstream runs beside the lean part for its first CHECKS results only
        assert len(calls) == (4 * (n + 1) if n < offstep_check.CHECKS else 4 * offstep_check.CHECKS)
    assert not step.failed
    assert "the first 8 results of each part equal upstream's" in caplog.text
    step.close()
    assert upstream.common.eagle_sample.__name__ == "eagle_sample"
    assert "_build_trivial_verify_input" not in vars(upstream.worker)


def test_anything_but_a_plain_greedy_one_token_verify_is_upstream_s(
    upstream: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = upstream.torch
    step = offstep.install_lean_off_step(upstream.worker, logging.getLogger("test"))
    assert step is not None
    step.checks = dict.fromkeys(offstep_check.PARTS, 0)  # trusted: upstream runs only where it must
    for batch in (
        greedy_batch(torch, is_all_greedy=False),
        greedy_batch(torch, logit_bias=torch.zeros((2, 6))),
    ):
        upstream.common.CALLS.clear()
        one_token_step(upstream, batch, [3, 5])
        assert upstream.common.CALLS == ["sample"]
    # four draft tokens (speculation on): upstream's sample and bonus, chain accepted to 2
    batch = greedy_batch(torch)
    upstream.common.CALLS.clear()
    chain = types.SimpleNamespace(
        draft_token_num=4, tree_topk=1, draft_token=torch.Tensor([1, 3, 4, 0, 2, 5, 1, 1])
    )
    predict, lens, index = upstream.common.eagle_sample(
        chain, batch, logits(torch, [3, 4, 2, 2, 5, 1, 2, 3])
    )
    assert lens.rows == [3, 3] and upstream.common.CALLS == ["sample"]
    upstream.spec_utils.SIMULATE_ACC_LEN = 2.5  # SGLANG_SIMULATE_ACC_LEN=2.5
    step.close()
    knobbed = offstep.install_lean_off_step(upstream.worker, logging.getLogger("test"))
    upstream.common.CALLS.clear()
    one_token_step(upstream, greedy_batch(torch), [3, 5])
    assert knobbed is not None and upstream.common.CALLS[0] == "sample"


def test_a_difference_from_upstream_hands_every_later_step_back(
    upstream: types.SimpleNamespace, caplog: pytest.LogCaptureFixture
) -> None:
    torch = upstream.torch
    original = upstream.common.eagle_sample

    def shifted(verify_input: Any, batch: Any, logits_output: Any, vocab_mask: Any = None):
        predict, lens, index = original(verify_input, batch, logits_output, vocab_mask)
        return predict + 1, lens, index  # an upstream the lean part does not reproduce

    upstream.common.eagle_sample = shifted
    step = offstep.install_lean_off_step(upstream.worker, logging.getLogger("test"))
    assert step is not None
    _, predict, *_ = one_token_step(upstream, greedy_batch(torch), [3, 5])
    assert step.failed
    assert "sample differs from upstream's ([0]: values)" in caplog.text
    upstream.common.CALLS.clear()
    upstream.mod.CALLS.clear()
    _, predict, *_ = one_token_step(upstream, greedy_batch(torch), [3, 5])
    assert predict.rows == [4, 6]  # upstream's answer from now on
    assert upstream.common.CALLS + upstream.mod.CALLS == [
        "sample",
        "bonus",
        "trivial_input",
        "stubs",
    ]


def test_upstream_samples_where_its_switches_cannot_be_read(
    upstream: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, offstep_check.ASYNC_PROBE)
    step = offstep.install_lean_off_step(upstream.worker, logging.getLogger("test"))
    assert step is not None and step.upstream_knobs
    upstream.common.CALLS.clear()
    one_token_step(upstream, greedy_batch(upstream.torch), [3, 5])
    assert upstream.common.CALLS[0] == "sample"


def test_upstream_s_step_without_torch(
    upstream: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, "torch")
    assert offstep.install_lean_off_step(upstream.worker, logging.getLogger("test")) is None
    assert upstream.common.eagle_sample.__name__ == "eagle_sample"


@pytest.mark.parametrize(("off_step", "lean"), [(OffStep.LEAN, True), (OffStep.UPSTREAM, False)])
def test_the_hook_gives_the_lean_step_unless_told_to_keep_upstreams(
    upstream: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch, off_step: OffStep, lean: bool
) -> None:
    config = switching_config(monkeypatch, PolicyConfig(), HookOptions(off_step=off_step))
    worker = upstream.worker
    worker.speculative_num_steps, worker.speculative_num_draft_tokens = 3, 4
    worker.server_args = types.SimpleNamespace(tp_size=1)
    hook = Hook(config)
    hook.attach(worker)
    assert (hook.offstep is not None, hook.controller is not None) == (lean, True)
    assert (upstream.common.eagle_sample.__name__ == "eagle_sample") is not lean
    hook.close()
    assert upstream.common.eagle_sample.__name__ == "eagle_sample"
    assert worker.adaptive_controller is None
