"""Built-in default selections for SGLang's EAGLE v2 (overlap) path, per release family.

The lead derives the default selection from the static call graph of the analysed release;
this table is the process-side fallback and the reference the graph is checked against
(``tests/tracer/test_static_selection.py`` on 0.5.9, 0.5.16 and 0.5.23). The families differ
in where the decode-result handler lives: a ``Scheduler`` mixin up to 0.5.12.post1, a scheduler
component class from 0.5.13 on.

>>> family_for("0.5.16")
<Family.SCHEDULER_COMPONENTS: 'scheduler-components'>
>>> str(builtin_names(Family.SCHEDULER_MIXIN)[Role.DECODE_RESULT][0]).split(":")[1]
'SchedulerOutputProcessorMixin.process_batch_result_decode'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import Enum

from sgtrace.errors import SgtraceError
from sgtrace.names import QualName
from sgtrace.tracer.events import Role
from sgtrace.tracer.selection import HOOK_DECISION, Selection, default_selection


class Family(Enum):
    """A range of SGLang releases sharing the names of the traced functions."""

    SCHEDULER_MIXIN = "scheduler-mixin"  # 0.5.9 .. 0.5.12.post1
    SCHEDULER_COMPONENTS = "scheduler-components"  # 0.5.13 ..


_SPEC = "sglang.srt.speculative.eagle_worker_v2"
_COMMON: Mapping[Role, tuple[QualName, ...]] = {
    Role.STEP: (QualName("sglang.srt.managers.scheduler", "Scheduler.run_batch"),),
    Role.SPEC_FORWARD: (QualName(_SPEC, "EAGLEWorkerV2.forward_batch_generation"),),
    Role.DRAFT: (QualName(_SPEC, "EagleDraftWorker.draft"),),
    Role.DRAFT_FORWARD: (QualName(_SPEC, "EagleDraftWorker.draft_forward"),),
    Role.VERIFY: (QualName(_SPEC, "EAGLEWorkerV2.verify"),),
    Role.DRAFT_EXTEND_PREFILL: (QualName(_SPEC, "EagleDraftWorker._draft_extend_for_prefill"),),
    Role.DRAFT_EXTEND_DECODE: (QualName(_SPEC, "EagleDraftWorker._draft_extend_for_decode"),),
    Role.TARGET_FORWARD: (
        QualName("sglang.srt.managers.tp_worker", "TpModelWorker.forward_batch_generation"),
    ),
    Role.DECISION: (HOOK_DECISION,),
}
_DECODE_RESULT: Mapping[Family, QualName] = {
    Family.SCHEDULER_MIXIN: QualName(
        "sglang.srt.managers.scheduler_output_processor_mixin",
        "SchedulerOutputProcessorMixin.process_batch_result_decode",
    ),
    Family.SCHEDULER_COMPONENTS: QualName(
        "sglang.srt.managers.scheduler_components.batch_result_processor",
        "SchedulerBatchResultProcessor.process_batch_result_decode",
    ),
}
_FIRST_COMPONENTS = (0, 5, 13)
_OLDEST = (0, 5, 9)


def family_for(version: str) -> Family:
    """The family of an SGLang release (``0.5.16``, ``0.5.12.post1``); 0.5.9 or newer."""
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)(?:\.?(?:post|rc|dev)\d*)*", version.strip())
    if match is None:
        raise SgtraceError(f"{version!r} is not an SGLang release number such as 0.5.16")
    numbers = tuple(int(part) for part in match.groups())
    if numbers < _OLDEST:
        raise SgtraceError(
            f"SGLang {version} predates the EAGLE v2 names the tracer knows (0.5.9 and newer); "
            "pass the functions to trace with --select module:Qual.name"
        )
    return Family.SCHEDULER_COMPONENTS if numbers >= _FIRST_COMPONENTS else Family.SCHEDULER_MIXIN


def builtin_names(family: Family) -> dict[Role, tuple[QualName, ...]]:
    """The default functions per role for ``family`` (decode-result handler first)."""
    return {Role.DECODE_RESULT: (_DECODE_RESULT[family],), **_COMMON}


def builtin_selection(version: str) -> Selection:
    """The default :class:`Selection` for an SGLang release, from the built-in table."""
    return default_selection(builtin_names(family_for(version)))
