"""The off state's decode step with less host work, inside SGLang's processes (stdlib only).

sgtrace copies this file verbatim as module ``sgtrace_hook_offstep`` beside ``sgtrace_hook``,
which calls :func:`install` with the speculative worker once the hook switches it. It never
imports SGLang; it reaches upstream's functions through the worker's own modules.

Why: off is upstream's zero-step state, a one-token verify through upstream's speculative
pipeline. Its GPU work is a plain decode's, but at low load its host work is the step's critical
path (docs/hook-mechanism.md, "What the off step costs on the host"). Four parts of that host
work are generic where the zero-step state needs little, and each is replaced here by what it
computes for a one-token, topk-1, greedy verify, with upstream's own function taking over
whenever that case does not hold:

* ``eagle_sample`` (looked up by ``run_eagle_verify`` in its module): for one verified token
  and all-greedy sampling without penalties, logit bias, grammar, simulated acceptance or NaN
  clean-up (``SGLANG_SIMULATE_ACC_LEN``, ``SGLANG_SANITIZE_NAN_LOGITS``), the
  greedy tree kernel accepts the root and samples the bonus token: ``predict`` is the argmax,
  every accept length 1, ``accept_index[i] = [i]`` (constant tensors per batch size);
* ``fill_bonus_tokens_func``: with one accepted token per request the bonus token is that token
  (a copy instead of a Triton launch);
* ``EAGLEWorkerV2._build_trivial_verify_input``: its retrieve tensors are constant per batch
  size (cached);
* ``EAGLEWorkerV2._stub_skipped_draft_extend`` (off without the draft extend): zero tensors of
  fixed shapes per batch size (cached; only stashed, never read while off).

The first :data:`CHECKS` results of each replaced part are compared with upstream's on the same
inputs (that costs a synchronisation, those steps only); a difference logs an error and hands
every later step back to upstream. ``SGTRACE_HOOK_OFF_STEP=upstream`` keeps upstream's step.
"""

from __future__ import annotations

import os
import sys
from typing import Any

OFF_STEP_ENV = "SGTRACE_HOOK_OFF_STEP"  # "lean" (default) or "upstream"
CHECKS = 8  # results of each part compared with upstream's before the part is trusted
PARTS = ("sample", "bonus", "trivial_input", "stubs")


def install(worker: Any, logger: Any) -> LeanOffStep | None:
    """Give ``worker`` the lean off step where its modules have what it replaces, else None."""
    if os.environ.get(OFF_STEP_ENV, "lean") != "lean" or "torch" not in sys.modules:
        return None
    step = LeanOffStep(worker, logger)
    if not step.parts:
        return None
    logger.info(
        "sgtrace-hook off step: lean %s (%s=upstream keeps upstream's); checked against upstream "
        "on its first %d results each",
        ", ".join(step.parts),
        OFF_STEP_ENV,
        CHECKS,
    )
    return step


def _upstream_knobs() -> bool:
    """Upstream's sampling knobs the lean sample does not follow (its simulated acceptance, its
    in-place NaN clean-up): where one is set, upstream samples."""
    simulate = os.environ.get("SGLANG_SIMULATE_ACC_LEN", "").strip()
    try:
        simulated = float(simulate) > 0 if simulate else False
    except ValueError:
        simulated = True
    sanitize = os.environ.get("SGLANG_SANITIZE_NAN_LOGITS", "").strip().lower()
    return simulated or sanitize not in ("", "0", "false", "no", "off")


def _globals_of(function: Any) -> dict[str, Any]:
    return getattr(function, "__globals__", {})


class LeanOffStep:
    """The replaced parts of one worker's zero-step decode step (see the module docstring)."""

    def __init__(self, worker: Any, logger: Any) -> None:
        self.worker = worker
        self.log = logger
        self.torch = sys.modules["torch"]
        self.checks = dict.fromkeys(PARTS, CHECKS)
        self.failed = False
        self.cache: dict[tuple[str, int], Any] = {}
        self.restore: list[tuple[Any, str, Any]] = []  # (namespace or object, name, original)
        self.parts: list[str] = []
        self.upstream_knobs = _upstream_knobs()
        cls = type(worker)
        worker_globals = _globals_of(getattr(cls, "forward_batch_generation", None))
        verify_globals = _globals_of(getattr(cls, "verify", None))
        common = _globals_of(verify_globals.get("run_eagle_verify")) or verify_globals
        self.verify_input_cls = worker_globals.get("EagleVerifyInput")
        self.capture_mode = worker_globals.get("CaptureHiddenMode")
        self.hidden_spec = worker_globals.get("get_draft_recurrent_hidden_state_spec")
        if callable(common.get("eagle_sample")):
            self.upstream_sample = self._replace(common, "eagle_sample", self.sample)
        if callable(common.get("fill_bonus_tokens_func")):
            self.upstream_bonus = self._replace(common, "fill_bonus_tokens_func", self.bonus)
        if self.verify_input_cls is not None and self.capture_mode is not None:
            if callable(getattr(cls, "_build_trivial_verify_input", None)):
                self.upstream_trivial = self._replace(
                    worker, "_build_trivial_verify_input", self.trivial_input
                )
        if self.hidden_spec is not None and callable(
            getattr(cls, "_stub_skipped_draft_extend", None)
        ):
            self.upstream_stubs = self._replace(worker, "_stub_skipped_draft_extend", self.stubs)

    def _replace(self, where: Any, name: str, lean: Any) -> Any:
        if isinstance(where, dict):
            original = where[name]
            where[name] = lean
        else:
            original = getattr(where, name)  # the bound method
            setattr(where, name, lean)
        self.restore.append((where, name, original))
        self.parts.append(name)
        return original

    def close(self) -> None:
        """Give every replaced part back to upstream."""
        for where, name, original in reversed(self.restore):
            if isinstance(where, dict):
                where[name] = original
            else:
                vars(where).pop(name, None)
        self.restore.clear()

    # -- the replaced parts ------------------------------------------------------------------

    def sample(self, verify_input: Any, batch: Any, logits_output: Any, vocab_mask: Any = None):
        """``eagle_sample`` of a one-token greedy verify: argmax, accept length 1, index i."""
        upstream = self.upstream_sample
        if (
            self.failed
            or vocab_mask is not None
            or getattr(verify_input, "draft_token_num", None) != 1
            or getattr(verify_input, "tree_topk", 1) != 1
            or batch.forward_mode.is_idle()
            or not self._plain_greedy(batch.sampling_info)
            or self.upstream_knobs
        ):
            return upstream(verify_input, batch, logits_output, vocab_mask)
        torch = self.torch
        bs = len(batch.seq_lens)
        predict = torch.argmax(logits_output.next_token_logits, dim=-1).to(torch.int32)
        ones, index = self._constant("accept", bs, self._accept_constants)
        lean = (predict, ones, index)
        if self.checks["sample"]:
            self._check("sample", lean, upstream(verify_input, batch, logits_output, vocab_mask))
        return lean

    def bonus(self, accept_tokens, accept_lens, bonus_tokens, accept_stride, batch_size):
        """``fill_bonus_tokens_func`` where every request accepted one token: that token."""
        if self.failed or accept_stride != 1 or not accept_tokens.is_cuda:
            return self.upstream_bonus(
                accept_tokens, accept_lens, bonus_tokens, accept_stride, batch_size
            )
        bonus_tokens.copy_(accept_tokens.reshape(-1)[:batch_size])
        if self.checks["bonus"]:
            expected = bonus_tokens.clone()
            self.upstream_bonus(accept_tokens, accept_lens, expected, accept_stride, batch_size)
            self._check("bonus", bonus_tokens, expected)
        return None

    def trivial_input(self, batch: Any) -> Any:
        """``_build_trivial_verify_input`` with its constant retrieve tensors cached."""
        upstream = self.upstream_trivial
        if self.failed or batch.forward_mode.is_idle():
            return upstream(batch)
        worker = self.worker
        backend = worker._target_worker.model_runner.attn_backend
        mask_buf, position_buf = backend.get_verify_buffers_to_fill_after_draft()
        if mask_buf is None or position_buf is not None:  # only the triton family's case here
            return upstream(batch)
        bs = batch.seq_lens.shape[0]
        index, next_token, next_sibling = self._constant("retrieve", bs, self._retrieve_constants)
        mask_buf.fill_(True)
        lean = self.verify_input_cls(
            draft_token=batch.spec_info.bonus_tokens,
            custom_mask=mask_buf,
            positions=batch.seq_lens.to(self.torch.int64),
            retrieve_index=index,
            retrieve_next_token=next_token,
            retrieve_next_sibling=next_sibling,
            retrieve_cum_len=None,
            spec_steps=0,
            topk=worker.topk,
            draft_token_num=1,
            capture_hidden_mode=self.capture_mode.FULL,
            seq_lens_sum=None,
            seq_lens_cpu=None,
        )
        if self.checks["trivial_input"]:
            self._check("trivial_input", vars(lean), vars(upstream(batch)))
        return lean

    def stubs(self, batch: Any, batch_output: Any) -> None:
        """``_stub_skipped_draft_extend`` with its zero tensors cached per batch size."""
        if self.failed:
            return self.upstream_stubs(batch, batch_output)
        bs = batch.seq_lens.shape[0]
        topk_p, topk_index, hidden = self._constant("stubs", bs, self._stub_constants)
        draft_input = batch_output.next_draft_input
        draft_input.topk_p = topk_p
        draft_input.topk_index = topk_index
        if hidden is not None:
            draft_input.hidden_states = hidden
        if self.checks["stubs"]:
            mine = (topk_p, topk_index, hidden)
            self.upstream_stubs(batch, batch_output)
            theirs = (
                draft_input.topk_p,
                draft_input.topk_index,
                draft_input.hidden_states if hidden is not None else None,
            )
            self._check("stubs", mine, theirs)
            draft_input.topk_p, draft_input.topk_index = topk_p, topk_index
            if hidden is not None:
                draft_input.hidden_states = hidden
        return None

    # -- helpers -------------------------------------------------------------------------------

    @staticmethod
    def _plain_greedy(info: Any) -> bool:
        return bool(getattr(info, "is_all_greedy", False)) and all(
            getattr(info, name, None) is None
            for name in ("acc_additive_penalties", "acc_scaling_penalties", "logit_bias")
        )

    def _constant(self, what: str, bs: int, make: Any) -> Any:
        key = (what, bs)
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = make(bs)
        return found

    def _accept_constants(self, bs: int) -> tuple[Any, Any]:
        torch, device = self.torch, self.worker.device
        ones = torch.ones((bs,), dtype=torch.int32, device=device)
        index = torch.arange(bs, dtype=torch.int32, device=device).unsqueeze(1)
        return ones, index

    def _retrieve_constants(self, bs: int) -> tuple[Any, Any, Any]:
        torch, device = self.torch, self.worker.device
        index = torch.arange(bs, dtype=torch.long, device=device).unsqueeze(1)
        next_token = torch.full((bs, 1), -1, dtype=torch.long, device=device)
        next_sibling = torch.full((bs, 1), -1, dtype=torch.long, device=device)
        return index, next_token, next_sibling

    def _stub_constants(self, bs: int) -> tuple[Any, Any, Any]:
        torch, worker = self.torch, self.worker
        topk_p = torch.zeros((bs, worker.topk), dtype=torch.float32, device=worker.device)
        topk_index = torch.zeros((bs, worker.topk), dtype=torch.int64, device=worker.device)
        size, dtype = self.hidden_spec(worker.draft_worker.draft_runner)
        hidden = (
            None if size is None else torch.zeros((bs, size), dtype=dtype, device=worker.device)
        )
        return topk_p, topk_index, hidden

    def _check(self, part: str, lean: Any, upstream: Any) -> None:
        difference = _difference(self.torch, lean, upstream)
        if difference is not None:
            self.failed = True
            self.log.error(
                "sgtrace-hook lean off step: %s differs from upstream's (%s); upstream's off "
                "step from now on",
                part,
                difference,
            )
            return
        self.checks[part] -= 1
        if not any(self.checks.values()):
            self.log.info(
                "sgtrace-hook lean off step: the first %d results of each part equal upstream's",
                CHECKS,
            )


def _difference(torch: Any, a: Any, b: Any, where: str = "") -> str | None:
    """Where ``a`` and ``b`` differ (tensors by shape, dtype and values), or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{where or 'fields'}: {sorted(a.keys() ^ b.keys())}"
        pairs = [(f"{where}.{k}", a[k], b[k]) for k in a]
    elif isinstance(a, tuple | list) and isinstance(b, tuple | list):
        if len(a) != len(b):
            return f"{where or 'result'}: {len(a)} against {len(b)} items"
        pairs = [(f"{where}[{i}]", x, y) for i, (x, y) in enumerate(zip(a, b, strict=True))]
    elif isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{where}: {tuple(a.shape)} {a.dtype} against {tuple(b.shape)} {b.dtype}"
        return None if a is b or torch.equal(a, b) else f"{where}: values"
    else:
        return None if a == b else f"{where}: {a!r} against {b!r}"
    for name, x, y in pairs:
        found = _difference(torch, x, y, name)
        if found is not None:
            return found
    return None
