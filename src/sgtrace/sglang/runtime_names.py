"""The SGLang names the code inside SGLang's processes looks up by name, and where each lives.

The payload (:mod:`sgtrace.payload`) cannot import the map: it gets these names through its
JSON config (:class:`~sgtrace.payload.config.SglangNames`, written by
:func:`sgtrace.hooks.render.hook_config`) and holds no SGLang name of its own
(``tests/payload/test_no_sglang_names.py`` walks it). Each :class:`RuntimeName` also says where
it lives (a :class:`Home`) and from which release on, so that ``tests/sglang/test_map_releases.py``
checks every one of them on every release of its family that the hook switches on, and a
field's alternatives (:func:`alternatives`: the decision carrier's receiver, which moved at
0.5.13) on every release.

>>> runtime_names(Family.ZERO_STEP_STATES).trivial_input
'_build_trivial_verify_input'
>>> sorted({n.home.kind.value for n in RUNTIME_NAMES})
['attribute', 'binding', 'method', 'module']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from sgtrace.payload.config import SglangNames
from sgtrace.sglang.anchors import SCHEDULER_MODULE, WORKER_CLASS, WORKER_MODULE, ZERO_STEP_CALLEE
from sgtrace.sglang.family import Family


class HomeKind(Enum):
    """What kind of definition a runtime name is, in its :class:`Home`."""

    MODULE = "module"  # the name is a module
    BINDING = "binding"  # a name bound at the top level of the module
    METHOD = "method"  # a method of the class
    ATTRIBUTE = "attribute"  # ``self.<name> = ...`` somewhere in the class
    PARAMETER = "parameter"  # a parameter of the function ``cls`` names (``Class.method``)


@dataclass(frozen=True)
class Home:
    """Where a runtime name is defined: in one of ``modules`` (the first that exists and
    defines it; upstream moved the verify body from ``eagle_worker_v2`` to
    ``eagle_worker_common`` at 0.5.16), in ``cls`` for methods and attributes (for a parameter,
    ``cls`` is the function's qualified name)."""

    kind: HomeKind
    modules: tuple[str, ...]
    cls: str | None = None


@dataclass(frozen=True)
class RuntimeName:
    """One name of :class:`~sgtrace.payload.config.SglangNames`: its field, its value, where it
    lives, and the first release that must define it (None: every release of the families that
    switch; a later one where the payload leaves that part to upstream before it), and the
    last where upstream dropped it.

    A field may have several entries, its alternatives, newest first, where upstream moved the
    thing named (the scheduler's request receiving moved into a component at 0.5.13). A release's
    name for such a field is the first alternative it defines
    (:func:`sgtrace.sglang.release_names.runtime_names_in`); each alternative's range is the
    releases it is the name on (None: from the first release the map knows), checked on every
    release, and ``until`` is where the next alternative takes over, not where the name is gone
    (the scheduler module stays)."""

    field: str
    name: str
    home: Home
    since: str | None = None
    until: str | None = None  # the last release that defines it, where upstream removed it


_VERIFY_MODULES = ("sglang.srt.speculative.eagle_worker_common", WORKER_MODULE)
_WORKER = Home(HomeKind.METHOD, (WORKER_MODULE,), WORKER_CLASS)
_WORKER_SELF = Home(HomeKind.ATTRIBUTE, (WORKER_MODULE,), WORKER_CLASS)
_WORKER_GLOBAL = Home(HomeKind.BINDING, (WORKER_MODULE,))
_VERIFY_GLOBAL = Home(HomeKind.BINDING, _VERIFY_MODULES)
_SCHEDULER_GLOBAL = Home(HomeKind.BINDING, (SCHEDULER_MODULE,))
_SCHEDULER_MODULE = Home(HomeKind.MODULE, (SCHEDULER_MODULE,))
_FUTURE_MAP = Home(HomeKind.METHOD, ("sglang.srt.managers.overlap_utils",), "FutureMap")
_FUTURE_MAP_SELF = Home(HomeKind.ATTRIBUTE, ("sglang.srt.managers.overlap_utils",), "FutureMap")
_RUNNER_SELF = Home(HomeKind.ATTRIBUTE, ("sglang.srt.model_executor.model_runner",), "ModelRunner")
_TRITON = "sglang.srt.layers.attention.triton_backend"
_BACKEND = Home(HomeKind.METHOD, (_TRITON,), "TritonAttnBackend")
_BACKEND_SELF = Home(HomeKind.ATTRIBUTE, (_TRITON,), "TritonAttnBackend")
_SPEC_UTILS = "sglang.srt.speculative.spec_utils"
# The scheduler receives each iteration's requests and, at TP size over 1, broadcasts the list
# from the first TP rank with a module global of the receiving module (carry.py): in the
# request receiver component from 0.5.13, in the scheduler itself before.
_RECEIVER = "sglang.srt.managers.scheduler_components.request_receiver"
_ASYNC_PROBE = "sglang.srt.utils.async_probe"

RUNTIME_NAMES: tuple[RuntimeName, ...] = (
    RuntimeName("controller_slot", "adaptive_controller", _WORKER_SELF),
    RuntimeName("target_worker", "_target_worker", _WORKER_SELF),
    RuntimeName(
        "get_attention_backend",
        "_get_attention_backend",
        Home(HomeKind.METHOD, ("sglang.srt.model_executor.model_runner",), "ModelRunner"),
    ),
    RuntimeName("build_state", "build_adaptive_runtime_state", _WORKER),
    RuntimeName("apply_state", "apply_runtime_state", _WORKER),
    RuntimeName("worker_forward", "forward_batch_generation", _WORKER),
    RuntimeName("worker_verify", "verify", _WORKER),
    RuntimeName("run_verify", "run_eagle_verify", _VERIFY_GLOBAL, since="0.5.16"),
    RuntimeName("sample", "eagle_sample", _VERIFY_GLOBAL),
    RuntimeName("fill_bonus", "fill_bonus_tokens_func", _VERIFY_GLOBAL, since="0.5.16"),
    RuntimeName("commit_mamba", "commit_mamba_states_after_verify", _VERIFY_GLOBAL),
    RuntimeName(
        "mamba_config_check",
        "mambaish_config",
        Home(HomeKind.BINDING, (_SPEC_UTILS,)),  # looked up where commit_mamba is defined
        since="0.5.16",
    ),
    RuntimeName("verify_input_class", "EagleVerifyInput", _WORKER_GLOBAL),
    RuntimeName("capture_mode_class", "CaptureHiddenMode", _WORKER_GLOBAL),
    RuntimeName(
        "hidden_state_spec", "get_draft_recurrent_hidden_state_spec", _WORKER_GLOBAL, "0.5.15"
    ),
    RuntimeName("trivial_input", ZERO_STEP_CALLEE, _WORKER),
    RuntimeName("stub_draft_extend", "_stub_skipped_draft_extend", _WORKER),
    RuntimeName("resolve_inputs", "resolve_forward_inputs", _SCHEDULER_GLOBAL),
    RuntimeName(
        "future_map_class",
        "FutureMap",
        Home(HomeKind.BINDING, ("sglang.srt.managers.overlap_utils",)),
    ),
    RuntimeName("future_map_resolve", "_resolve_spec_extras", _FUTURE_MAP),
    RuntimeName("future_map_stash", "stash", _FUTURE_MAP),
    RuntimeName("spec_utils_module", _SPEC_UTILS, Home(HomeKind.MODULE, (_SPEC_UTILS,))),
    RuntimeName("simulate_acc_len", "SIMULATE_ACC_LEN", Home(HomeKind.BINDING, (_SPEC_UTILS,))),
    RuntimeName("async_probe_module", _ASYNC_PROBE, Home(HomeKind.MODULE, (_ASYNC_PROBE,))),
    RuntimeName("async_probe_envs", "envs", Home(HomeKind.BINDING, (_ASYNC_PROBE,))),
    RuntimeName(
        "sanitize_nan_logits",
        "SGLANG_SANITIZE_NAN_LOGITS",
        Home(HomeKind.ATTRIBUTE, ("sglang.srt.environ",), "Envs"),
    ),
    RuntimeName("backend_init_metadata", "init_forward_metadata", _BACKEND),
    RuntimeName("backend_init_metadata_out_graph", "init_forward_metadata_out_graph", _BACKEND),
    RuntimeName("backend_forward_extend", "forward_extend", _BACKEND),
    RuntimeName("backend_forward_decode", "forward_decode", _BACKEND),
    RuntimeName("backend_decode_kernel", "decode_attention_fwd", _BACKEND_SELF),
    RuntimeName("backend_draft_tokens", "num_draft_tokens", _BACKEND_SELF),
    RuntimeName(
        "runner_slot",
        "model_runner",
        Home(HomeKind.ATTRIBUTE, ("sglang.srt.managers.tp_worker",), "TpModelWorker"),
    ),
    RuntimeName("backend_slot", "attn_backend", _RUNNER_SELF),
    RuntimeName(
        "batch_algorithm",
        "spec_algorithm",
        Home(HomeKind.ATTRIBUTE, ("sglang.srt.managers.schedule_batch",), "ScheduleBatch"),
    ),
    RuntimeName("future_map_algorithm", "spec_algo", _FUTURE_MAP_SELF),
    RuntimeName(
        "future_map_lazy_flag", "_forward_buf_initialized", _FUTURE_MAP_SELF, until="0.5.18"
    ),
    RuntimeName("future_map_topk_flag", "need_topk", _FUTURE_MAP_SELF),
    # Gone from 0.5.17 (upstream reads ``attn_backend.verify_mask`` there): the lean trivial
    # verify input asks it without a fallback, which the release walk records here.
    RuntimeName(
        "backend_verify_buffers",
        "get_verify_buffers_to_fill_after_draft",
        _BACKEND,
        until="0.5.16",
    ),
    # alternatives, newest first: the first a release defines is its name (release_names.py);
    # before 0.5.13 the scheduler receives its requests itself
    RuntimeName("receiver_module", _RECEIVER, Home(HomeKind.MODULE, (_RECEIVER,)), "0.5.13"),
    RuntimeName("receiver_module", SCHEDULER_MODULE, _SCHEDULER_MODULE, until="0.5.12"),
    RuntimeName(
        "receiver_class", "SchedulerRequestReceiver", Home(HomeKind.BINDING, (_RECEIVER,)), "0.5.13"
    ),
    RuntimeName("receiver_class", "Scheduler", _SCHEDULER_GLOBAL, until="0.5.12"),
    RuntimeName(
        "receive_requests",
        "recv_requests",
        Home(HomeKind.METHOD, (_RECEIVER,), "SchedulerRequestReceiver"),
        "0.5.13",
    ),
    RuntimeName(
        "receive_requests",
        "recv_requests",
        Home(HomeKind.METHOD, (SCHEDULER_MODULE,), "Scheduler"),
        until="0.5.12",
    ),
    RuntimeName(
        "broadcast_requests", "broadcast_pyobj", Home(HomeKind.BINDING, (_RECEIVER,)), "0.5.13"
    ),
    RuntimeName("broadcast_requests", "broadcast_pyobj", _SCHEDULER_GLOBAL, until="0.5.12"),
)


def runtime_names(family: Family) -> SglangNames:
    """The names the payload is given by default: each field's first alternative, the newest
    releases' (the request receiver component's for the carrier). A hook gets its release's own
    (:func:`sgtrace.sglang.release_names.runtime_names_in`); tests and benchmarks use these.

    The same on every family: the names depend on the release, not on its family.
    """
    del family  # the names depend on the release, not its family: see runtime_names_in
    return SglangNames(**first_names(RUNTIME_NAMES))


def first_names(
    entries: Iterable[RuntimeName], accept: Callable[[RuntimeName], bool] = lambda entry: True
) -> dict[str, str]:
    """Each field's name: that of the first of its entries ``accept`` takes (by default the
    first; a release's own with ``sgtrace.sglang.defined.defines``)."""
    chosen: dict[str, str] = {}
    for entry in entries:
        if entry.field not in chosen and accept(entry):
            chosen[entry.field] = entry.name
    return chosen


def alternatives() -> dict[str, tuple[RuntimeName, ...]]:
    """The fields the map gives several names, each with its entries in order (newest first).

    >>> [(e.home.modules[0], e.name, e.until) for e in alternatives()["receiver_class"]]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('sglang.srt.managers.scheduler_components.request_receiver', 'SchedulerRequestReceiver',
      None), ('sglang.srt.managers.scheduler', 'Scheduler', '0.5.12')]
    """
    by_field: dict[str, tuple[RuntimeName, ...]] = {}
    for entry in RUNTIME_NAMES:
        by_field[entry.field] = (*by_field.get(entry.field, ()), entry)
    return {field: entries for field, entries in by_field.items() if len(entries) > 1}
