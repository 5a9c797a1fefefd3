"""Every SGLang module, class and method name the hook and the tracer rely on, in one place.

These are the anchors the locator (:mod:`~sgtrace.sglang.locate`) starts from and the call
names it recognises; what lies between them (which class handles the decode result, which
function the worker's decode branch calls) is found in the release's call graph. Where a name
differs between families it is data (:func:`expected_names`), checked on every release from
0.5.9 to 0.5.23 by ``tests/sglang/test_map_releases.py``. The names the hook's off state (the
scheduler's plain decode path) looks up are :mod:`~sgtrace.sglang.plain_names`.

>>> str(DECIDE_CALLER)
'sglang.srt.managers.scheduler:Scheduler.process_batch_result'
>>> str(expected_names(Family.SCHEDULER_MIXINS)[Part.DECODE_RESULT][0]).split(":")[1]
'SchedulerOutputProcessorMixin.process_batch_result_decode'
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

from sgtrace.names import QualName
from sgtrace.sglang.family import Family

SCHEDULER_MODULE = "sglang.srt.managers.scheduler"
WORKER_MODULE = "sglang.srt.speculative.eagle_worker_v2"
WORKER_CLASS = "EAGLEWorkerV2"
DRAFT_WORKER_CLASS = "EagleDraftWorker"
SPECULATIVE_PACKAGE = "sglang.srt.speculative"

# decide: the decode-result call of the scheduler, under a positive ``is_decode()`` guard
DECIDE_CALLER = QualName(SCHEDULER_MODULE, "Scheduler.process_batch_result")
DECIDE_CALLEE = "process_batch_result_decode"
DECIDE_GUARD = "is_decode()"
# upstream's switch: the decode branch (a negated ``is_extend()`` guard) of the worker's forward,
# where upstream activates its runtime states (0.5.13+); the family is read there
SWITCH_CALLER = QualName(WORKER_MODULE, f"{WORKER_CLASS}.forward_batch_generation")
SWITCH_CALLEE = "activate_step_by_batch"
OBSERVE_CALLEE = "verify"  # the decode branch's anchor where there are no runtime states
EXTEND_GUARD = "is_extend()"
# upstream's zero-step state (a one-token verify, 0.5.14+): the decode branch builds its input
ZERO_STEP_CALLEE = "_build_trivial_verify_input"
# attach: the end of the worker's constructor
ATTACH_TARGET = QualName(WORKER_MODULE, f"{WORKER_CLASS}.__init__")


def worker_method(name: str) -> QualName:
    """``EAGLEWorkerV2.name`` in the worker's module."""
    return QualName(WORKER_MODULE, f"{WORKER_CLASS}.{name}")


class Part(Enum):
    """A function of SGLang's EAGLE v2 (overlap) decode path that the tracer records."""

    DECODE_RESULT = "decode_result"  # the decide site's callee
    STEP = "step"  # one scheduler step
    SPEC_FORWARD = "spec_forward"  # the worker's forward (upstream's switch site's caller)
    DRAFT = "draft"
    DRAFT_FORWARD = "draft_forward"
    VERIFY = "verify"
    DRAFT_EXTEND_PREFILL = "draft_extend_prefill"
    DRAFT_EXTEND_DECODE = "draft_extend_decode"
    TARGET_FORWARD = "target_forward"


STEP = QualName(SCHEDULER_MODULE, "Scheduler.run_batch")
# Parts found as calls of the worker's forward (and of its own helpers), by the callee's name.
WORKER_CALLEES: Mapping[Part, str] = {
    Part.DRAFT: "draft",
    Part.VERIFY: "verify",
    Part.DRAFT_EXTEND_PREFILL: "_draft_extend_for_prefill",
    Part.DRAFT_EXTEND_DECODE: "_draft_extend_for_decode",
    Part.TARGET_FORWARD: "forward_batch_generation",
}
DRAFT_CALLEE = "draft_forward"  # what the draft calls: Part.DRAFT_FORWARD

_COMMON: Mapping[Part, tuple[QualName, ...]] = {
    Part.STEP: (STEP,),
    Part.SPEC_FORWARD: (SWITCH_CALLER,),
    Part.DRAFT: (QualName(WORKER_MODULE, f"{DRAFT_WORKER_CLASS}.draft"),),
    Part.DRAFT_FORWARD: (QualName(WORKER_MODULE, f"{DRAFT_WORKER_CLASS}.draft_forward"),),
    Part.VERIFY: (worker_method("verify"),),
    Part.DRAFT_EXTEND_PREFILL: (
        QualName(WORKER_MODULE, f"{DRAFT_WORKER_CLASS}._draft_extend_for_prefill"),
    ),
    Part.DRAFT_EXTEND_DECODE: (
        QualName(WORKER_MODULE, f"{DRAFT_WORKER_CLASS}._draft_extend_for_decode"),
    ),
    Part.TARGET_FORWARD: (
        QualName("sglang.srt.managers.tp_worker", "TpModelWorker.forward_batch_generation"),
    ),
}
_MIXIN_DECODE_RESULT = QualName(
    "sglang.srt.managers.scheduler_output_processor_mixin",
    "SchedulerOutputProcessorMixin.process_batch_result_decode",
)
_COMPONENT_DECODE_RESULT = QualName(
    "sglang.srt.managers.scheduler_components.batch_result_processor",
    "SchedulerBatchResultProcessor.process_batch_result_decode",
)
_DECODE_RESULT: Mapping[Family, QualName] = {
    Family.SCHEDULER_MIXINS: _MIXIN_DECODE_RESULT,
    Family.RUNTIME_STATES: _COMPONENT_DECODE_RESULT,
    Family.ZERO_STEP_STATES: _COMPONENT_DECODE_RESULT,
}
# Upstream's switch site's callee: the decode branch's verify, or where it activates a runtime
# state.
_SWITCH_TARGET: Mapping[Family, QualName] = {
    Family.SCHEDULER_MIXINS: worker_method(OBSERVE_CALLEE),
    Family.RUNTIME_STATES: worker_method(SWITCH_CALLEE),
    Family.ZERO_STEP_STATES: worker_method(SWITCH_CALLEE),
}


def expected_names(family: Family) -> dict[Part, tuple[QualName, ...]]:
    """The functions of each part on releases of ``family`` (decode-result handler first).

    The locator finds them in the call graph; these are what it finds on every release of the
    family. Over all families, the names a release defines are what the tracer falls back on
    for a part the graph does not show.
    """
    return {Part.DECODE_RESULT: (_DECODE_RESULT[family],), **_COMMON}


def switch_target(family: Family) -> QualName:
    """The callee of upstream's switch site on releases of ``family``."""
    return _SWITCH_TARGET[family]


def hook_relies_on(decide_target: QualName) -> tuple[QualName, ...]:
    """The functions the hook's decide and attach sites wrap, sorted (the plain off state's
    names are :mod:`sgtrace.sglang.plain_names`)."""
    return tuple(sorted({decide_target, ATTACH_TARGET}))


def map_names(family: Family) -> tuple[QualName, ...]:
    """Every name of the map on releases of ``family``: what the release walk checks."""
    traced = {name for names in expected_names(family).values() for name in names}
    anchors = {DECIDE_CALLER, SWITCH_CALLER, _SWITCH_TARGET[family]}
    return tuple(sorted(traced | anchors | set(hook_relies_on(_DECODE_RESULT[family]))))
