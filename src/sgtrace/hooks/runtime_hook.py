"""sgtrace speculation toggle, running inside SGLang's processes (stdlib only).

sgtrace copies this file verbatim as module ``sgtrace_hook``: into a bootstrap directory for
``inject-hook --mode runtime`` (``install`` runs from ``sitecustomize`` in every process and
patches SGLang's modules as they are imported, with the import hook of the sibling module
``sgtrace_hook_imports``; ``uninstall()`` restores them), or into ``sglang/`` for ``--mode patch``
(the patched source calls ``attach`` and ``on_decode_result``; the config beside this file is
read on first use). It never imports SGLang.

On SGLang 0.5.14+ (docs/hook-mechanism.md): ``attach`` puts a :class:`ToggleController` in the
worker's ``adaptive_controller`` slot, so that upstream's ``init_cuda_graphs`` has it build the
zero-step state at start-up (where the attention backend allows, its one-token verify attends
as a decode does: :func:`_fast_verify`); ``on_decode_result`` lets the policy decide, on every
TP rank, from facts all ranks share, records the decision (:func:`record_decision`) and logs
toggles; before each decode launch upstream calls the controller's ``activate_step_by_batch``,
which applies the decided state. On older releases the hook records and logs what the policy
would do, and switches nothing.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import json
import logging
import math
import os
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any

LOGGER = logging.getLogger("sgtrace_hook")
CONFIG_NAME = "sgtrace_hook.json"
# the attention of the zero-step state's one-token verify (_fast_verify): "decode" (default),
# "split-kv" or "upstream"
OFF_KERNEL_ENV = "SGTRACE_HOOK_OFF_KERNEL"
# 1: log each completed measurement of a measuring policy at INFO (several a second), else DEBUG
MEASURE_LOG_ENV = "SGTRACE_HOOK_LOG_MEASUREMENTS"

# This process's last decisions: (step, rank, batch_size, spec_on, changed, reason,
# accept_length, step_period_s)
DECISIONS: deque[tuple[int, int, int, bool, bool, str, float | None, float | None]] = deque(
    maxlen=4096
)

_HOOK: _Hook | None = None  # the hook installed in this process


def install(config_path: str) -> _Hook:
    """Install the hook described by the JSON file ``config_path`` (idempotent)."""
    global _HOOK
    if _HOOK is not None:
        return _HOOK
    with open(config_path, encoding="utf-8") as fh:
        config = json.load(fh)
    hook = _Hook(config)
    _HOOK = hook
    if config["patcher_module"] is not None:  # runtime mode: patch SGLang as it is imported
        patch = config["patch"]
        hook.patcher = importlib.import_module(config["patcher_module"]).ImportPatcher(
            {
                patch["decide"]["module"]: [(patch["decide"]["qualname"], _then(_decide_after))],
                patch["attach"]["module"]: [(patch["attach"]["qualname"], _then(_attach_after))],
            },
            LOGGER,
        )
        hook.patcher.start()
    return hook


def uninstall() -> None:
    """Undo :func:`install`: remove the import hook, restore patched functions and workers."""
    global _HOOK
    hook, _HOOK = _HOOK, None
    if hook is not None:
        hook.close()


def record_decision(
    step: int,
    rank: int,
    batch_size: int,
    spec_on: bool,
    changed: bool,
    reason: str,
    accept_length: float | None,
    step_period_s: float | None = None,
) -> None:
    """One policy decision on one rank; the tracer instruments this function. Keep it small."""
    DECISIONS.append(
        (step, rank, batch_size, spec_on, changed, reason, accept_length, step_period_s)
    )


def attach(worker: Any) -> None:
    """Site ``attach``: called with the speculative worker at the end of its ``__init__``."""
    hook = _current()
    try:
        hook.attach(worker)
    except Exception as exc:  # the worker stays as upstream built it
        hook.fail("attach", exc)


def on_decode_result(batch: Any, result: Any) -> None:
    """Site ``decide``: called after SGLang processed the result of a decode batch."""
    hook = _current()
    try:
        hook.on_decode_result(batch, result)
    except Exception as exc:  # the server keeps running, speculation as launched
        hook.fail("on_decode_result", exc)


def _current() -> _Hook:
    if _HOOK is None:  # patch mode: the config sits beside this file
        return install(os.path.join(os.path.dirname(os.path.abspath(__file__)), CONFIG_NAME))
    return _HOOK


class ToggleController:
    """Takes the place of upstream's ``AdaptiveController`` on one worker (same protocol).

    Holds the pre-built runtime states (``on_steps`` and 0) and applies ``target_steps`` when
    the worker calls :meth:`activate_step_by_batch` before launching a decode batch.
    """

    def __init__(self, worker: Any) -> None:
        self.worker = worker
        self.on_steps = worker.speculative_num_steps
        self.target_steps = self.on_steps
        self.states: dict[int, Any] = {}

    def register(self, state: Any, steps: int | None = None) -> None:
        self.states[state.speculative_num_steps if steps is None else steps] = state

    def init_states(self, cuda_graph_bs: list[int] | None = None) -> None:
        if 0 in self.states:
            return
        kernel = os.environ.get(OFF_KERNEL_ENV, "decode")
        runner = getattr(getattr(self.worker, "_target_worker", None), "model_runner", None)
        try:
            with _fast_verify(runner, kernel) as switched:
                self.states[0] = self.worker.build_adaptive_runtime_state(
                    speculative_num_steps=0,
                    speculative_num_draft_tokens=1,
                    cuda_graph_bs=cuda_graph_bs,
                )
        except Exception as exc:  # the worker keeps its launch state (upstream restores it)
            LOGGER.error("sgtrace-hook: no zero-step state (%r); speculation stays on", exc)
            return
        LOGGER.info(
            "sgtrace-hook zero-step state built; its one-token verify attention: %s",
            "; ".join(switched)
            if switched
            else f"as upstream builds it ({OFF_KERNEL_ENV}={kernel}, or no split-KV kernel)",
        )

    @property
    def can_switch(self) -> bool:
        return 0 in self.states

    def on_verify_complete(
        self, num_correct_drafts_per_req: list[int], batch_size: int = 0
    ) -> None:
        """Ignored: decisions are taken at the decode-result site, from every rank's facts."""

    def activate_step_by_batch(self, batch_size: int) -> None:
        target = self.target_steps
        if target != self.worker.speculative_num_steps and target in self.states:
            self.worker.apply_runtime_state(self.states[target])


class _Hook:
    """The hook of one process: policy, counters, the controller, the import patcher."""

    def __init__(self, config: dict[str, Any]) -> None:
        policy_module = importlib.import_module(config["policy_module"])
        self.config = config
        self.policy_module = policy_module
        self.policy = policy_module.policy_from_dict(config["policy"])
        self.observation = policy_module.Observation
        self.timed = bool(config["policy"].get("measure"))  # step periods for a measure policy
        shown = os.environ.get(MEASURE_LOG_ENV, "") not in ("", "0")
        self.measure_level = logging.INFO if shown else logging.DEBUG
        self.last_result: float | None = None
        self.last_iter: int | None = None  # the forward_iter of the last decode result
        self.step = 0
        self.spec_on = True
        self.rank = -1
        self.controller = None
        self.offstep: Any = None  # the lean off step (sgtrace_hook_offstep), where installed
        self.worker = None
        self.failed = False
        self.warned: set[str] = set()
        self.patcher: Any = None  # the ImportPatcher of runtime mode

    def close(self) -> None:
        if self.patcher is not None:
            self.patcher.stop()
        offstep, self.offstep = self.offstep, None
        if offstep is not None:
            offstep.close()
        controller, self.controller = self.controller, None
        if controller is not None:
            controller.target_steps = controller.on_steps
            controller.activate_step_by_batch(0)
            controller.worker.adaptive_controller = None

    def warn_once(self, key: str, message: str, *args: object) -> None:
        if key not in self.warned:
            self.warned.add(key)
            LOGGER.warning(message, *args)

    def attach(self, worker: Any) -> None:
        self.worker = worker
        self.rank = _rank_of(worker)
        tp_size = getattr(getattr(worker, "server_args", None), "tp_size", 1)
        if self.timed and isinstance(tp_size, int) and tp_size > 1:
            # timings differ between ranks, and so would decisions: the clockless rules instead
            self.timed = False
            self.policy = self.policy_module.policy_from_dict(
                {**self.config["policy"], "measure": False}
            )
            self.warn_once(
                "measure-tp",
                "sgtrace-hook rank=%d: measure needs TP size 1 (here %d: each rank would time "
                "its own steps and decide apart); the load rule and acceptance gate decide",
                self.rank,
                tp_size,
            )
        reason = self.why_observe_only(worker)
        if reason is not None:
            self.warn_once(
                "observe",
                "sgtrace-hook rank=%d: observe only, decisions are logged but not applied: %s",
                self.rank,
                reason,
            )
            return
        self.controller = ToggleController(worker)
        worker.adaptive_controller = self.controller
        if self.config.get("offstep_module"):
            try:
                offstep = importlib.import_module(self.config["offstep_module"])
                self.offstep = offstep.install(worker, LOGGER, _decide_caller_module(self.config))
            except Exception as exc:  # upstream's off step, as without it
                LOGGER.error("sgtrace-hook: no lean off step (%r); upstream's off step", exc)
        LOGGER.info(
            "sgtrace-hook attached rank=%d worker=%s spec_steps=%d (off = zero-step state)",
            self.rank,
            type(worker).__name__,
            self.controller.on_steps,
        )

    def why_observe_only(self, worker: Any) -> str | None:
        """Why this worker cannot be switched, or None when it can."""
        if not self.config["can_switch"]:
            return f"{self.config['source']}: {self.config['family_reason']}"
        if getattr(worker, "adaptive_controller", None) is not None:
            return "--speculative-adaptive is on: upstream's controller owns the switch"
        if getattr(worker, "_hosts_draft", True) is False:
            return "this pipeline stage does not run the draft model"
        topk = getattr(worker, "topk", None)
        steps = getattr(worker, "speculative_num_steps", None)
        drafts = getattr(worker, "speculative_num_draft_tokens", None)
        if topk != 1 or not isinstance(steps, int) or steps < 1 or drafts != steps + 1:
            return (
                f"speculative_eagle_topk={topk}, num_steps={steps}, num_draft_tokens={drafts}: "
                "the zero-step state needs topk 1 and num_draft_tokens = num_steps + 1"
            )
        where = self.config["unsupported_reason"]
        check = getattr(importlib.import_module(where["module"]), where["qualname"], None)
        if check is None:
            return f"{where['module']} has no {where['qualname']}"
        upstream = check(worker.server_args)
        return None if upstream is None else f"upstream adaptive machinery refuses: {upstream}"

    def on_decode_result(self, batch: Any, result: Any) -> None:
        if self.failed:
            return
        if self.worker is None:
            if not batch.spec_algorithm.is_none():
                self.warn_once(
                    "no-worker",
                    "sgtrace-hook: speculative decode without an EAGLEWorkerV2 in this process "
                    "(non-overlap EAGLEWorker of sglang<=0.5.12?): nothing is decided",
                )
            return
        lengths = _accept_lengths(result)
        period = None
        if self.timed:  # a period that held another batch (a prefill) is not a step's: None
            now, it = time.perf_counter(), getattr(batch, "forward_iter", None)
            consecutive = it is None or self.last_iter is None or it == self.last_iter + 1
            if self.last_result is not None and consecutive:
                period = now - self.last_result
            self.last_result, self.last_iter = now, it
        obs = self.observation(
            step=self.step,
            batch_size=len(batch.reqs),
            accept_lengths=lengths,
            spec_on=self.spec_on,
            step_period_s=period,
        )
        rates = self.policy.state.rates  # replaced when a measurement completes
        decision = self.policy.decide(obs)
        if (
            self.timed
            and self.policy.state.rates is not rates
            and LOGGER.isEnabledFor(self.measure_level)
        ):
            self.log_measurement(obs.step, obs.batch_size)
        self.step += 1
        self.spec_on = decision.spec_on
        if self.controller is not None:
            self.controller.target_steps = self.controller.on_steps if decision.spec_on else 0
        mean = math.fsum(lengths) / len(lengths) if lengths else None
        reason = decision.reason.value
        record_decision(
            obs.step,
            self.rank,
            obs.batch_size,
            decision.spec_on,
            decision.changed,
            reason,
            mean,
            period,
        )
        if decision.changed:
            LOGGER.info(
                "sgtrace-hook toggle step=%d rank=%d batch_size=%d spec=%s reason=%s%s",
                obs.step,
                self.rank,
                obs.batch_size,
                "on" if decision.spec_on else "off",
                reason,
                "" if self.controller is not None and self.controller.can_switch else " applied=no",
            )

    def log_measurement(self, step: int, batch_size: int) -> None:
        """A measurement completed: both states' goodput in its bucket (tokens per request-second,
        and how many seconds of decoding ago each was measured)."""
        state = self.policy.state
        entry = self.policy_module.rates_at(state, batch_size)
        if entry is None:
            return
        bucket, on, on_at, off, off_at = entry

        def show(rate: float | None, at: float | None) -> str:
            return "-" if rate is None else f"{rate:.1f}@{state.clock_s - at:.1f}s"

        LOGGER.log(
            self.measure_level,
            "sgtrace-hook measured step=%d rank=%d bucket=%d batch_size=%d on=%s off=%s accept=%s",
            step,
            self.rank,
            bucket,
            batch_size,
            show(on, on_at),
            show(off, off_at),
            "-" if state.accept_mean is None else f"{state.accept_mean:.2f}",
        )

    def fail(self, where: str, exc: Exception) -> None:
        """Stop deciding and run speculation as launched; every rank fails alike (same inputs)."""
        self.failed = True
        if self.controller is not None:
            self.controller.target_steps = self.controller.on_steps
        LOGGER.error(
            "sgtrace-hook rank=%d disabled after an error in %s: %r", self.rank, where, exc
        )


def _accept_lengths(result: Any) -> tuple[float, ...] | None:
    """Accepted tokens per request (bonus included) of a speculative verify, else None.

    A result produced by the zero-step state (one token per request) drafted nothing: None.
    Rows below 1 (no verify ran for them) are dropped.
    """
    width = getattr(result, "speculative_num_draft_tokens", None)
    lens = getattr(result, "accept_lens", None)
    if lens is None or (width is not None and width <= 1):
        return None
    values = lens.tolist() if hasattr(lens, "tolist") else list(lens)
    kept = tuple(float(v) for v in values if v >= 1)
    return kept or None


def _decide_caller_module(config: dict[str, Any]) -> str | None:
    """The module of the decide site's caller (the scheduler's, whose ``run_batch`` resolves each
    batch's inputs through the future map), or None."""
    for site in config.get("sites", ()):
        if site.get("kind") == "decide" and site.get("caller"):
            return str(site["caller"]).partition(":")[0]
    return None


def _rank_of(worker: Any) -> int:
    """The TP rank of this worker: its own attribute, its ParallelState, or torch's world rank."""
    rank = getattr(worker, "tp_rank", None)
    if rank is None:
        rank = getattr(getattr(worker, "ps", None), "tp_rank", None)
    dist = sys.modules.get("torch.distributed")
    if rank is None and dist is not None and dist.is_available() and dist.is_initialized():
        rank = dist.get_rank()
    return -1 if rank is None else int(rank)


@contextlib.contextmanager
def _fast_verify(runner: Any, kernel: str) -> Any:
    """While the zero-step state is built, give its target attention backends a faster verify.

    ``build_adaptive_runtime_state`` makes the state's target backend with the model runner's
    ``_get_attention_backend`` and captures its CUDA graphs at once, so the kernel is chosen
    here, on each backend as it is made; the launch state is untouched. With the triton backend
    a one-token TARGET_VERIFY runs the extend kernel, many times slower than a decode's
    attention. ``kernel`` (:data:`OFF_KERNEL_ENV`): ``decode`` runs it as a decode
    (:func:`_verify_as_decode`), ``split-kv`` on upstream's split-KV verify kernel for topk-1
    chains (0.5.14+, enabled upstream on AMD gfx95 only), ``upstream`` as upstream builds it.
    ``decode`` falls back to ``split-kv`` where a backend does not fit. Yields what was done,
    one ``"Class: kernel"`` per backend changed.
    """
    done: list[str] = []
    original = getattr(runner, "_get_attention_backend", None)
    if kernel == "upstream" or original is None or "_get_attention_backend" in vars(runner):
        yield done
        return

    def build(*args: Any, **kwargs: Any) -> Any:
        backend = original(*args, **kwargs)
        name = type(backend).__name__
        if kernel == "decode" and _decodes_one_token_verify(backend):
            _verify_as_decode(backend)
            done.append(f"{name}: decode kernel")
        elif (
            getattr(backend, "use_verify_splitkv", None) is False
            and getattr(backend, "topk", None) == 1
            and callable(getattr(backend, "verify_splitkv_fwd", None))
        ):
            backend.use_verify_splitkv = True
            done.append(f"{name}: split-KV verify kernel")
        return backend

    runner._get_attention_backend = build
    try:
        yield done
    finally:
        del runner._get_attention_backend


_DECODE_API = (
    "init_forward_metadata",
    "init_forward_metadata_out_graph",
    "forward_extend",
    "forward_decode",
)


def _decodes_one_token_verify(backend: Any) -> bool:
    """A triton-family backend (it has a decode kernel) verifying one token of a topk-1 chain."""
    return (
        getattr(backend, "num_draft_tokens", None) == 1
        and getattr(backend, "topk", None) == 1
        and callable(getattr(backend, "decode_attention_fwd", None))
        and all(callable(getattr(type(backend), name, None)) for name in _DECODE_API)
    )


def _verify_as_decode(backend: Any) -> None:
    """Run ``backend``'s one-token TARGET_VERIFY attention as a decode step's (instance-level).

    A one-token verify is a decode: the token's KV slot is already the next entry of its
    request's row in ``req_to_token`` (the verify assigns ``out_cache_loc`` from there), so the
    metadata of a DECODE batch with ``seq_lens + 1`` (prefix and the token) is exact, and
    ``forward_decode`` writes the token's KV and attends over the whole row, with the decode
    kernel and its split-KV buffers, in the eager path and in the captured CUDA graphs alike
    (0.5.14+: ``init_forward_metadata`` eager, ``init_forward_metadata_out_graph`` at capture
    and before each replay). Every other mode (the target's prefill while off) is unchanged.
    """
    metadata = backend.init_forward_metadata
    out_graph = backend.init_forward_metadata_out_graph
    extend, decode = backend.forward_extend, backend.forward_decode

    def as_decode(batch: Any) -> Any:
        if not batch.forward_mode.is_target_verify():
            return batch
        view = copy.copy(batch)
        view.forward_mode = type(batch.forward_mode).DECODE
        view.spec_info = None
        view.seq_lens = batch.seq_lens + 1
        if getattr(batch, "seq_lens_sum", None) is not None:
            view.seq_lens_sum = batch.seq_lens_sum + batch.seq_lens.shape[0]
        if getattr(batch, "seq_lens_cpu", None) is not None:
            view.seq_lens_cpu = batch.seq_lens_cpu + 1
        return view

    def init_forward_metadata(forward_batch: Any) -> Any:
        return metadata(as_decode(forward_batch))

    def init_forward_metadata_out_graph(forward_batch: Any, in_capture: bool = False) -> Any:
        return out_graph(as_decode(forward_batch), in_capture=in_capture)

    def forward_extend(q: Any, k: Any, v: Any, layer: Any, forward_batch: Any, *a: Any, **kw: Any):
        run = decode if forward_batch.forward_mode.is_target_verify() else extend
        return run(q, k, v, layer, forward_batch, *a, **kw)

    backend.init_forward_metadata = init_forward_metadata
    backend.init_forward_metadata_out_graph = init_forward_metadata_out_graph
    backend.forward_extend = forward_extend


def _decide_after(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    on_decode_result(
        args[0] if args else kwargs.get("batch"), args[1] if args[1:] else kwargs.get("result")
    )


def _attach_after(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    attach(self)


def _then(
    site: Callable[[Any, tuple[Any, ...], dict[str, Any]], None],
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A wrapper factory: run the original method, then ``site`` while the hook is installed."""

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(self, *args, **kwargs)
            if _HOOK is not None:
                site(self, args, kwargs)
            return out

        return wrapper

    return wrap
