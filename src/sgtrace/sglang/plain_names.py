"""The SGLang names of the plain off state (``sgtrace_payload.plainoff``), and where each lives.

The plain off state switches a speculative server to SGLang's plain decode path by re-admitting
its running requests (docs/hook-mechanism.md). It uses SGLang's own retraction, radix cache and
prefill paths; these are the names it reaches them by. Each entry says where it is defined so
that the release walk (``tests/sglang/test_map_releases.py``) checks it on every release it
claims, like :mod:`sgtrace.sglang.runtime_names`.

>>> plain_off_names().switch_qualname
'Scheduler.get_new_batch_prefill'
"""

from __future__ import annotations

from pathlib import Path

from sgtrace.payload.config import PlainOffNames
from sgtrace.sglang.anchors import SCHEDULER_MODULE
from sgtrace.sglang.defined import defines
from sgtrace.sglang.runtime_names import Home, HomeKind, RuntimeName, first_names

_COMMON = "sglang.srt.mem_cache.common"
_BATCH = "sglang.srt.managers.schedule_batch"
_RUNNER = "sglang.srt.model_executor.model_runner"
_SPEC_INFO = "sglang.srt.speculative.spec_info"
_SCHEDULER = Home(HomeKind.METHOD, (SCHEDULER_MODULE,), "Scheduler")
_SCHEDULER_SELF = Home(HomeKind.ATTRIBUTE, (SCHEDULER_MODULE,), "Scheduler")
_REQ = Home(HomeKind.METHOD, (_BATCH,), "Req")
_REQ_SELF = Home(HomeKind.ATTRIBUTE, (_BATCH,), "Req")
_RUNNER_SELF = Home(HomeKind.ATTRIBUTE, (_RUNNER,), "ModelRunner")
_RUNNER_METHOD = Home(HomeKind.METHOD, (_RUNNER,), "ModelRunner")
_OVERLAP = "sglang.srt.managers.overlap_utils"
_OUTPUT_MIXIN = "sglang.srt.managers.scheduler_output_processor_mixin"
_STREAMER = "sglang.srt.managers.scheduler_components.output_streamer"
_RELEASE = Home(HomeKind.PARAMETER, (_COMMON,), "release_kv_cache")

PLAIN_NAMES: tuple[RuntimeName, ...] = (
    RuntimeName("switch_module", SCHEDULER_MODULE, Home(HomeKind.MODULE, (SCHEDULER_MODULE,))),
    RuntimeName("switch_qualname", "Scheduler.get_new_batch_prefill", _SCHEDULER),
    RuntimeName("result_qualname", "Scheduler.process_batch_result", _SCHEDULER),
    # an abort looks for queued requests in the waiting queue: the held ones are shown there
    RuntimeName("abort_qualname", "Scheduler.abort_request", _SCHEDULER),
    # what streams outputs to the tokenizer manager, which was started for a speculative server:
    # it reads the algorithm of its own object (the scheduler's until 0.5.12), shown the launched
    # one while off so that the outputs keep their speculative metrics fields
    RuntimeName(
        "output_module", _OUTPUT_MIXIN, Home(HomeKind.MODULE, (_OUTPUT_MIXIN,)), until="0.5.12"
    ),
    RuntimeName("output_module", _STREAMER, Home(HomeKind.MODULE, (_STREAMER,)), since="0.5.13"),
    RuntimeName(
        "output_qualname",
        "SchedulerOutputProcessorMixin.stream_output",
        Home(HomeKind.METHOD, (_OUTPUT_MIXIN,), "SchedulerOutputProcessorMixin"),
        until="0.5.12",
    ),
    RuntimeName(
        "output_qualname",
        "SchedulerOutputStreamer.stream_output",
        Home(HomeKind.METHOD, (_STREAMER,), "SchedulerOutputStreamer"),
        since="0.5.13",
    ),
    RuntimeName("running_batch_name", "running_batch", _SCHEDULER_SELF),
    RuntimeName("release_module", _COMMON, Home(HomeKind.MODULE, (_COMMON,))),
    RuntimeName("release_kv", "release_kv_cache", Home(HomeKind.BINDING, (_COMMON,))),
    RuntimeName("release_insert_kw", "is_insert", _RELEASE, until="0.5.21"),
    RuntimeName("release_insert_kw", "checkpoint", _RELEASE, since="0.5.22"),
    RuntimeName("tree_cache_attr", "tree_cache", _SCHEDULER_SELF),
    RuntimeName("reset_retract", "reset_for_retract", _REQ),
    RuntimeName("retracted_flag", "is_retracted", _REQ_SELF),
    RuntimeName("filter_method", "filter_batch", Home(HomeKind.METHOD, (_BATCH,), "ScheduleBatch")),
    # set when admission stopped for lack of room; SGLang clears it when requests leave the
    # running batch, and schedules no prefill while it is set
    RuntimeName(
        "batch_full_flag", "batch_is_full", Home(HomeKind.ATTRIBUTE, (_BATCH,), "ScheduleBatch")
    ),
    RuntimeName("add_to_queue", "_add_request_to_queue", _SCHEDULER),
    RuntimeName(
        "retracted_kw",
        "is_retracted",
        Home(HomeKind.PARAMETER, (SCHEDULER_MODULE,), "Scheduler._add_request_to_queue"),
    ),
    RuntimeName("waiting_queue_name", "waiting_queue", _SCHEDULER_SELF),
    RuntimeName("scheduler_algorithm", "spec_algorithm", _SCHEDULER_SELF),
    RuntimeName("worker_slot", "model_worker", _SCHEDULER_SELF),
    RuntimeName("target_slot", "tp_worker", _SCHEDULER_SELF),
    RuntimeName("future_map_slot", "future_map", _SCHEDULER_SELF),
    # the plain future map is built as a plain server builds it: the launched map's class and
    # constructor arguments (recorded when SGLang built it) with algorithm NONE
    RuntimeName("future_map_module", _OVERLAP, Home(HomeKind.MODULE, (_OVERLAP,))),
    RuntimeName("future_map_class", "FutureMap", Home(HomeKind.BINDING, (_OVERLAP,))),
    RuntimeName(
        "runner_slot",
        "model_runner",
        Home(HomeKind.ATTRIBUTE, ("sglang.srt.managers.tp_worker",), "TpModelWorker"),
    ),
    RuntimeName("runner_algorithm", "spec_algorithm", _RUNNER_SELF),
    RuntimeName("backend_slot", "attn_backend", _RUNNER_SELF),
    RuntimeName("new_attn_backend", "_get_attention_backend", _RUNNER_METHOD),
    # the target's CUDA graphs, captured for what its algorithm says (DECODE for NONE)
    RuntimeName("capture_decode", "init_device_graphs", _RUNNER_METHOD, until="0.5.13"),
    RuntimeName("capture_decode", "init_decode_cuda_graph", _RUNNER_METHOD, since="0.5.14"),
    RuntimeName(
        "none_member",
        "NONE",
        Home(HomeKind.ATTRIBUTE, (_SPEC_INFO,), "SpeculativeAlgorithm"),
    ),
)


def plain_off_names() -> PlainOffNames:
    """Each field's first alternative as listed (the oldest releases' where a field has
    several: 0.5.9-0.5.13's); :func:`plain_off_names_in` reads a release's own."""
    return PlainOffNames(**first_names(PLAIN_NAMES))


def plain_off_names_in(root: Path) -> tuple[PlainOffNames | None, tuple[str, ...]]:
    """The plain off state's names in the release at ``root``: for each field the first of its
    alternatives the release defines; None and the fields it lacks where one has none."""
    chosen = first_names(PLAIN_NAMES, lambda entry: defines(root, entry))
    lacking = tuple(dict.fromkeys(e.field for e in PLAIN_NAMES if e.field not in chosen))
    return (None, lacking) if lacking else (PlainOffNames(**chosen), ())


def where_lacking(fields: tuple[str, ...]) -> str:
    """Each of ``fields`` with the names the map gives it and where they live, for messages.

    >>> where_lacking(("release_kv",))
    'release_kv: release_kv_cache (a binding of sglang.srt.mem_cache.common)'
    """
    return "; ".join(
        f"{field}: " + " or ".join(_where(e) for e in PLAIN_NAMES if e.field == field)
        for field in fields
    )


def _where(entry: RuntimeName) -> str:
    home = entry.home
    if home.kind is HomeKind.MODULE:
        return f"{entry.name} (a module)"
    owner = " or ".join(home.modules) + ("" if home.cls is None else f":{home.cls}")
    return f"{entry.name} (a {home.kind.value} of {owner})"
