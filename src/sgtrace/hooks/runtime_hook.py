"""sgtrace speculation toggle, running inside SGLang's processes (stdlib only).

sgtrace copies this file verbatim as module ``sgtrace_hook``: into a bootstrap directory for
``inject-hook --mode runtime`` (``install`` runs from ``sitecustomize``, once per process), or
into ``sglang/`` for ``--mode patch`` (SGLang's patched source calls ``attach`` and
``on_decode_result``; the config is read on first use). It never imports SGLang itself: the
runtime mode patches SGLang's modules when they are first imported, through a ``sys.meta_path``
post-import hook, and ``uninstall()`` puts every original back.

How speculation is turned off (SGLang 0.5.14 and later; see docs/hook-mechanism.md):

* ``attach(worker)`` runs at the end of ``EAGLEWorkerV2.__init__`` and sets the worker's
  ``adaptive_controller`` to a :class:`ToggleController` (upstream leaves it ``None`` unless
  ``--speculative-adaptive`` is on). Upstream's ``init_cuda_graphs`` then registers the launch
  state with it and asks it to ``init_states``: it builds the zero-step state (a one-token
  verify plus a one-token draft extend, CUDA graphs captured once) through the worker's own
  ``build_adaptive_runtime_state``.
* ``on_decode_result(batch, result)`` runs after each decode result is processed, on every TP
  rank, with facts every rank shares (step counter, batch size, accept lengths). The policy
  decides; the decision is recorded (:func:`record_decision`) and every toggle is logged.
* Upstream calls ``adaptive_controller.activate_step_by_batch`` at the top of the decode branch
  of ``forward_batch_generation``, before launch: the controller applies the decided state with
  the worker's ``apply_runtime_state``, so every rank switches in the same iteration.

On older releases the hook only records and logs what the policy would do (observe only).
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import json
import logging
import math
import os
import sys
from collections import deque

LOGGER = logging.getLogger("sgtrace_hook")
CONFIG_NAME = "sgtrace_hook.json"
ORIGINAL_ATTR = "__sgtrace_hook_original__"

# Decisions recorded in this process, newest last: (step, rank, batch_size, spec_on, changed,
# reason, accept_length). Bounded, so that a long-running server does not grow it.
DECISIONS: deque = deque(maxlen=4096)

_HOOK = None  # the _Hook installed in this process, or None


def install(config_path):
    """Install the hook described by the JSON file ``config_path`` (idempotent)."""
    global _HOOK
    if _HOOK is not None:
        return _HOOK
    with open(config_path, encoding="utf-8") as fh:
        config = json.load(fh)
    hook = _Hook(config)
    _HOOK = hook
    if config["delivery"] == "runtime":
        hook.patcher.start()
    return hook


def uninstall():
    """Undo :func:`install`: remove the import hook, restore patched functions and workers."""
    global _HOOK
    hook, _HOOK = _HOOK, None
    if hook is not None:
        hook.close()


def record_decision(step, rank, batch_size, spec_on, changed, reason, accept_length):
    """One policy decision on one rank; the tracer instruments this function. Keep it small."""
    DECISIONS.append((step, rank, batch_size, spec_on, changed, reason, accept_length))


def attach(worker):
    """Site ``attach``: called with the speculative worker at the end of its ``__init__``."""
    hook = _current()
    try:
        hook.attach(worker)
    except Exception as exc:  # the worker stays as upstream built it
        hook.fail("attach", exc)


def on_decode_result(batch, result):
    """Site ``decide``: called after SGLang processed the result of a decode batch."""
    hook = _current()
    try:
        hook.on_decode_result(batch, result)
    except Exception as exc:  # the server keeps running, speculation as launched
        hook.fail("on_decode_result", exc)


def _current():
    if _HOOK is None:  # patch mode: the config sits beside this file
        return install(os.path.join(os.path.dirname(os.path.abspath(__file__)), CONFIG_NAME))
    return _HOOK


class ToggleController:
    """Takes the place of upstream's ``AdaptiveController`` on one worker (same protocol).

    Holds the pre-built runtime states (``on_steps`` and 0) and applies ``target_steps`` when
    the worker calls :meth:`activate_step_by_batch` before launching a decode batch.
    """

    def __init__(self, worker):
        self.worker = worker
        self.on_steps = worker.speculative_num_steps
        self.target_steps = self.on_steps
        self.states = {}

    @property
    def candidate_steps(self):
        return sorted(self.states)

    def register(self, state, steps=None):
        self.states[state.speculative_num_steps if steps is None else steps] = state

    def init_states(self, cuda_graph_bs=None):
        if 0 not in self.states:
            self.states[0] = self.worker.build_adaptive_runtime_state(
                speculative_num_steps=0, speculative_num_draft_tokens=1, cuda_graph_bs=cuda_graph_bs
            )

    def on_verify_complete(self, num_correct_drafts_per_req, batch_size=0):
        """Ignored: decisions are taken at the decode-result site, from every rank's facts."""

    def activate_step_by_batch(self, batch_size):
        target = self.target_steps
        if target != self.worker.speculative_num_steps and target in self.states:
            self.worker.apply_runtime_state(self.states[target])


class _Hook:
    """The hook of one process: policy, counters, the controller, the import patcher."""

    def __init__(self, config):
        policy_module = importlib.import_module(config["policy_module"])
        self.config = config
        self.policy = policy_module.policy_from_dict(config["policy"])
        self.observation = policy_module.Observation
        self.step = 0
        self.spec_on = True
        self.rank = -1
        self.controller = None
        self.worker = None
        self.failed = False
        self.warned = set()
        patch = config["patch"]
        self.patcher = _Patcher(
            {
                patch["decide"]["module"]: [(patch["decide"]["qualname"], _after_decode_result)],
                patch["attach"]["module"]: [(patch["attach"]["qualname"], _after_init)],
            }
        )

    def close(self):
        self.patcher.stop()
        controller, self.controller = self.controller, None
        if controller is not None:
            controller.target_steps = controller.on_steps
            controller.activate_step_by_batch(0)
            controller.worker.adaptive_controller = None

    def warn_once(self, key, message, *args):
        if key not in self.warned:
            self.warned.add(key)
            LOGGER.warning(message, *args)

    def attach(self, worker):
        self.worker = worker
        self.rank = _rank_of(worker)
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
        LOGGER.info(
            "sgtrace-hook attached rank=%d worker=%s spec_steps=%d (off = zero-step state)",
            self.rank,
            type(worker).__name__,
            self.controller.on_steps,
        )

    def why_observe_only(self, worker):
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

    def on_decode_result(self, batch, result):
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
        obs = self.observation(
            step=self.step, batch_size=len(batch.reqs), accept_lengths=lengths, spec_on=self.spec_on
        )
        decision = self.policy.decide(obs)
        self.step += 1
        self.spec_on = decision.spec_on
        if self.controller is not None:
            self.controller.target_steps = self.controller.on_steps if decision.spec_on else 0
        mean = math.fsum(lengths) / len(lengths) if lengths else None
        reason = decision.reason.value
        record_decision(
            obs.step, self.rank, obs.batch_size, decision.spec_on, decision.changed, reason, mean
        )
        if decision.changed:
            LOGGER.info(
                "sgtrace-hook toggle step=%d rank=%d batch_size=%d spec=%s reason=%s%s",
                obs.step,
                self.rank,
                obs.batch_size,
                "on" if decision.spec_on else "off",
                reason,
                "" if self.controller is not None else " applied=no",
            )

    def fail(self, where, exc):
        """Stop deciding and run speculation as launched; every rank fails alike (same inputs)."""
        self.failed = True
        if self.controller is not None:
            self.controller.target_steps = self.controller.on_steps
        LOGGER.error(
            "sgtrace-hook rank=%d disabled after an error in %s: %r", self.rank, where, exc
        )


def _accept_lengths(result):
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


def _rank_of(worker):
    """The TP rank of this worker: its own attribute, its ParallelState, or torch's world rank."""
    rank = getattr(worker, "tp_rank", None)
    if rank is None:
        rank = getattr(getattr(worker, "ps", None), "tp_rank", None)
    dist = sys.modules.get("torch.distributed")
    if rank is None and dist is not None and dist.is_available() and dist.is_initialized():
        rank = dist.get_rank()
    return -1 if rank is None else int(rank)


def _after_decode_result(original):
    @functools.wraps(original)
    def process_batch_result_decode(self, batch, result, *args, **kwargs):
        out = original(self, batch, result, *args, **kwargs)
        if _HOOK is not None:
            on_decode_result(batch, result)
        return out

    return process_batch_result_decode


def _after_init(original):
    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if _HOOK is not None:
            attach(self)

    return __init__


class _Patcher:
    """Wraps functions of modules when they are imported; restores them on :meth:`stop`.

    ``targets`` maps a module name to ``(qualname, make_wrapper)`` pairs.
    """

    def __init__(self, targets):
        self.targets = targets
        self.finder = _PostImportFinder(self)
        self.saved = []  # (owner, attribute name, original or None when not in owner.__dict__)

    def start(self):
        sys.meta_path.insert(0, self.finder)
        for name in self.targets:
            if name in sys.modules:
                self.patch_module(sys.modules[name])

    def stop(self):
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        for owner, attr, original in reversed(self.saved):
            if original is None:
                delattr(owner, attr)
            else:
                setattr(owner, attr, original)
        self.saved.clear()

    def patch_module(self, module):
        for qualname, make_wrapper in self.targets.get(module.__name__, ()):
            *path, attr = qualname.split(".")
            owner = module
            for part in path:
                owner = getattr(owner, part, None)
            current = getattr(owner, attr, None) if owner is not None else None
            if current is None:
                LOGGER.error(
                    "sgtrace-hook: %s has no %s; the hook was generated for another release",
                    module.__name__,
                    qualname,
                )
                continue
            if getattr(current, ORIGINAL_ATTR, None) is not None:
                continue  # already wrapped (module reloaded)
            wrapper = make_wrapper(current)
            setattr(wrapper, ORIGINAL_ATTR, current)
            self.saved.append((owner, attr, vars(owner).get(attr)))
            setattr(owner, attr, wrapper)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds target modules through the other finders and wraps their loader."""

    def __init__(self, patcher):
        self.patcher = patcher

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.patcher.targets:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PatchingLoader(spec.loader, self.patcher.patch_module)
        return spec


class _PatchingLoader(importlib.abc.Loader):
    """Runs the real loader, then patches the fresh module; delegates everything else."""

    def __init__(self, inner, on_loaded):
        self._inner = inner
        self._on_loaded = on_loaded

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        self._on_loaded(module)
