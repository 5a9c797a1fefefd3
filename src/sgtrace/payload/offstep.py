"""The off state's decode step with less host work.

Off is upstream's zero-step state, a one-token verify through upstream's speculative pipeline.
Its GPU work is a plain decode's, but at low load its host work is the step's critical path
(docs/hook-mechanism.md, "What the off step costs on the host"). Parts of that host work are
generic where the zero-step state needs little; each is replaced here by what it computes for a
one-token, topk-1, greedy verify, with upstream's own function taking over whenever that case
does not hold:

* ``eagle_sample`` (looked up by ``run_eagle_verify`` in its module): for one verified token
  and all-greedy sampling without penalties, logit bias, grammar, simulated acceptance or NaN
  clean-up, ``predict`` is the argmax, every accept length 1, ``accept_index[i] = [i]``;
* ``fill_bonus_tokens_func``: with one accepted token per request the bonus token is that token;
* ``EAGLEWorkerV2._build_trivial_verify_input``: its retrieve tensors are constant per batch
  size (cached);
* ``EAGLEWorkerV2._stub_skipped_draft_extend``: zero tensors of fixed shapes per batch size
  (cached; only stashed, never read while off);
* ``commit_mamba_states_after_verify``: whether the target has mamba-style state is asked once;
* the scheduler's ``FutureMap`` (found through the first call of ``resolve_forward_inputs`` in
  the scheduler's module): while a step stays in the zero-step state, ``_resolve_spec_extras``
  gathers only the bonus tokens, and ``stash`` writes only the bonus tokens of a step whose
  draft fields are the cached stubs.

Every SGLang name above reaches the step through the config (:class:`~.config.SglangNames`).
The first :data:`~.offstep_check.CHECKS` results of each part but the mamba check are compared
with upstream's on the same inputs; a difference logs an error and hands every later step of
its group back to upstream. Every replacement is undone by :meth:`LeanOffStep.close`.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from .config import SglangNames
from .offstep_check import CHECKS, GROUPS, PARTS, difference, relays_topk_only, upstream_knobs
from .patcher import Patches


def install_lean_off_step(
    worker: Any,
    logger: logging.Logger,
    scheduler_module: str | None = None,
    *,
    names: SglangNames,
) -> LeanOffStep | None:
    """Give ``worker`` the lean off step where its modules have what it replaces, else None.

    ``scheduler_module``: the module whose ``run_batch`` calls ``resolve_forward_inputs(batch,
    future_map)`` (the caller of the hook's decide site), where the future map is found.
    """
    if "torch" not in sys.modules:
        return None
    step = LeanOffStep(worker, logger, names, sys.modules.get(scheduler_module or ""))
    if not step.parts:
        return None
    logger.info(
        "sgtrace-hook off step: lean %s (off_step=upstream keeps upstream's); checked against "
        "upstream on its first %d results each",
        ", ".join(step.parts),
        CHECKS,
    )
    return step


def _globals_of(function: Any) -> dict[str, Any]:
    found: dict[str, Any] = getattr(function, "__globals__", {})
    return found


class LeanOffStep:
    """The replaced parts of one worker's zero-step decode step (see the module docstring)."""

    def __init__(
        self, worker: Any, logger: logging.Logger, names: SglangNames, scheduler: Any = None
    ) -> None:
        self.worker = worker
        self.names = n = names
        self.log = logger
        self.torch = sys.modules["torch"]
        self.checks = dict.fromkeys(PARTS, CHECKS)
        self.failed = False  # a part of the step differed from upstream's: all of it upstream's
        self.relay_failed = False  # the same for the future map's parts
        self.cache: dict[tuple[str, int], Any] = {}
        self.patches = Patches()
        self.parts: list[str] = []
        self.relay_map: Any = None
        self.mamba_free: dict[int, bool] = {}  # id(model runner) -> no mamba-style state
        self.upstream_knobs = upstream_knobs(names)
        cls = type(worker)
        worker_globals = _globals_of(getattr(cls, n.worker_forward, None))
        verify_globals = _globals_of(getattr(cls, n.worker_verify, None))
        common = _globals_of(verify_globals.get(n.run_verify)) or verify_globals
        # upstream's names, looked up where the worker's own module finds them (Any: SGLang's)
        self.verify_input_cls: Any = worker_globals.get(n.verify_input_class)
        self.capture_mode: Any = worker_globals.get(n.capture_mode_class)
        self.hidden_spec: Any = worker_globals.get(n.hidden_state_spec)
        if callable(common.get(n.sample)):
            self.upstream_sample = self._replace(common, n.sample, self.sample)
        if callable(common.get(n.fill_bonus)):
            self.upstream_bonus = self._replace(common, n.fill_bonus, self.bonus)
        if self.verify_input_cls is not None and self.capture_mode is not None:
            if callable(getattr(cls, n.trivial_input, None)):
                self.upstream_trivial = self._replace(worker, n.trivial_input, self.trivial_input)
        if self.hidden_spec is not None and callable(getattr(cls, n.stub_draft_extend, None)):
            self.upstream_stubs = self._replace(worker, n.stub_draft_extend, self.stubs)
        commit = common.get(n.commit_mamba)
        self.mambaish: Any = _globals_of(commit).get(n.mamba_config_check)
        if callable(commit) and callable(self.mambaish):
            self.upstream_commit = self._replace(common, n.commit_mamba, self.commit_mamba)
        namespace: dict[str, Any] = vars(scheduler) if scheduler is not None else {}
        self.scheduler_namespace = namespace
        if callable(namespace.get(n.resolve_inputs)):
            self.upstream_inputs = self._replace(
                namespace, n.resolve_inputs, self.adopt, part=False
            )

    def _replace(self, where: Any, name: str, lean: Any, part: bool = True) -> Any:
        """Put ``lean`` in ``where``'s ``name`` (a module namespace or an object's instance
        attribute); ``part``: list it among the parts replaced."""
        if isinstance(where, dict):
            original = self.patches.set_item(where, name, lean)
        else:  # an instance attribute over the bound method
            original = self.patches.set_attr(where, name, lean)
        if part:
            self.parts.append(name)
        return original

    def close(self) -> None:
        """Give every replaced part back to upstream."""
        self.patches.undo()

    # -- the replaced parts ------------------------------------------------------------------

    def sample(
        self, verify_input: Any, batch: Any, logits_output: Any, vocab_mask: Any = None
    ) -> Any:
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

    def bonus(
        self,
        accept_tokens: Any,
        accept_lens: Any,
        bonus_tokens: Any,
        accept_stride: int,
        batch_size: int,
    ) -> None:
        """``fill_bonus_tokens_func`` where every request accepted one token: that token."""
        if self.failed or accept_stride != 1 or not accept_tokens.is_cuda:
            self.upstream_bonus(accept_tokens, accept_lens, bonus_tokens, accept_stride, batch_size)
            return
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
        runner = getattr(getattr(worker, self.names.target_worker), self.names.runner_slot)
        backend = getattr(runner, self.names.backend_slot)
        buffers = getattr(backend, self.names.backend_verify_buffers, None)
        if buffers is None:  # a backend (or release, 0.5.17+) that keeps its mask elsewhere
            return upstream(batch)
        mask_buf, position_buf = buffers()
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
            self.upstream_stubs(batch, batch_output)
            return
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

    def commit_mamba(self, target_worker: Any, *args: Any, **kwargs: Any) -> Any:
        """``commit_mamba_states_after_verify``, asking once whether the target has mamba state."""
        if not self.failed and self.worker.speculative_num_steps == 0:
            runner = getattr(target_worker, self.names.runner_slot)
            free = self.mamba_free.get(id(runner))
            if free is None:
                free = self.mamba_free[id(runner)] = self.mambaish(runner.model_config) is None
            if free:
                return None
        return self.upstream_commit(target_worker, *args, **kwargs)

    def adopt(self, batch: Any, future_map: Any, *args: Any, **kwargs: Any) -> Any:
        """``resolve_forward_inputs`` once: take the future map, give the function back."""
        n = self.names
        self.patches.restore(self.scheduler_namespace, n.resolve_inputs)
        fields = (
            n.future_map_resolve,
            n.future_map_stash,
            "output_tokens_buf",
            n.future_map_algorithm,
        )
        if all(hasattr(future_map, f) for f in fields) and relays_topk_only(future_map, n):
            self.relay_map = future_map
            self.upstream_resolve = self._replace(
                future_map, n.future_map_resolve, self.resolve_extras
            )
            self.upstream_stash = self._replace(future_map, n.future_map_stash, self.lean_stash)
            self.parts.append(n.future_map_class)
            self.log.info(
                "sgtrace-hook lean off step: the future map's spec extras too (%s, %s)",
                n.future_map_resolve,
                n.future_map_stash,
            )
        return self.upstream_inputs(batch, future_map, *args, **kwargs)

    def resolve_extras(self, batch: Any) -> None:
        """``FutureMap._resolve_spec_extras`` of a step that stays in the zero-step state: the
        bonus tokens only (the trivial verify input reads nothing else of the draft input)."""
        relay, draft = self.relay_map, batch.spec_info
        indices = getattr(draft, "future_indices", None)
        if (
            self.relay_failed
            or indices is None
            or indices.shape[0] == 0
            or getattr(draft, "future_dsa_topk_indices_available", False)
            or not self._stays_off()
        ):
            self.upstream_resolve(batch)
            return
        if getattr(indices, "is_cuda", False):  # as upstream: the gather's stream holds them
            indices.record_stream(self.torch.get_device_module(relay.device).current_stream())
        bonus = relay.output_tokens_buf[indices]
        if self.checks["resolve"]:
            self.upstream_resolve(batch)
            self._check("resolve", bonus, draft.bonus_tokens)
        draft.bonus_tokens = bonus
        if hasattr(draft, "dsa_topk_indices"):
            draft.dsa_topk_indices = None
        return None

    def lean_stash(self, future_indices: Any, payload: Any) -> None:
        """``FutureMap.stash`` of a step whose draft fields are the cached stubs: the bonus
        tokens only (the stub rows are never read while off)."""
        future_map = self.relay_map
        stubs = self.cache.get(("stubs", future_indices.shape[0]))
        if (
            self.relay_failed
            or stubs is None
            or payload.topk_p is not stubs[0]
            or getattr(payload, "draft_probs", None) is not None
            or getattr(payload, "dsa_topk_indices", None) is not None
            or getattr(future_map, "_relay", None) is not None
            or not getattr(future_map, self.names.future_map_lazy_flag, True)
            or getattr(future_map, "topk_p_buf", None) is None
        ):
            self.upstream_stash(future_indices, payload)
            return
        bonus = payload.bonus_tokens.to(future_map.output_tokens_buf.dtype)
        if self.checks["relay_stash"]:
            self.upstream_stash(future_indices, payload)
            self._check("relay_stash", bonus, future_map.output_tokens_buf[future_indices])
            return None
        future_map.output_tokens_buf[future_indices] = bonus
        return None

    # -- helpers -------------------------------------------------------------------------------

    def _stays_off(self) -> bool:
        """This step runs in the zero-step state: the worker is there and will not switch."""
        controller = getattr(self.worker, self.names.controller_slot, None)
        return (
            self.worker.speculative_num_steps == 0
            and getattr(controller, "target_steps", None) == 0
        )

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
        found = difference(self.torch, lean, upstream)
        if found is not None:
            step = part in GROUPS["step"]
            if step:
                self.failed = True
            else:
                self.relay_failed = True
            self.log.error(
                "sgtrace-hook lean off step: %s differs from upstream's (%s); upstream's %s "
                "from now on",
                part,
                found,
                "off step" if step else "future map relay",
            )
            return
        self.checks[part] -= 1
        group = next(name for name, parts in GROUPS.items() if part in parts)
        if not any(self.checks[p] for p in GROUPS[group]):
            self.log.info(
                "sgtrace-hook lean off step: the first %d results of each part equal upstream's%s",
                CHECKS,
                "" if group == "step" else f" ({group})",
            )
