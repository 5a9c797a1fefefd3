"""The parts the tracer records, found by the map's locator in toy SGLang trees."""

from __future__ import annotations

from pathlib import Path

from sgtrace.graphs.build import Project
from sgtrace.names import QualName
from sgtrace.sglang import Part, PartsFound, find_parts
from tests.hooks.hook_support import toy_tree

WORKER = "sglang.srt.speculative.eagle_worker_v2"
TOY = "sglang.srt.speculative.toy_model"
# A draft worker that defines the map's draft-extend method, which the toy forward never calls.
DRAFT_WORKER = """

class EagleDraftWorker:
    def _draft_extend_for_decode(self, batch):
        return batch
"""


def toy_parts(case: str, dest: Path) -> PartsFound:
    return find_parts(Project(toy_tree(case, dest), use_cache=False))


def located(*names: str) -> tuple[QualName, ...]:
    return tuple(QualName.parse(name) for name in names)


def test_parts_of_the_zero_step_toy_and_the_map_names_it_defines(tmp_path: Path) -> None:
    tree = toy_tree("zero_step_states", tmp_path)
    with (tree.root / "sglang/srt/speculative/eagle_worker_v2.py").open("a") as worker:
        worker.write(DRAFT_WORKER)
    found = find_parts(Project(tree, use_cache=False))
    assert found == PartsFound(
        {
            Part.STEP: located("sglang.srt.managers.scheduler:Scheduler.run_batch"),
            Part.DECODE_RESULT: located(
                "sglang.srt.managers.scheduler_components.batch_result_processor:"
                "SchedulerBatchResultProcessor.process_batch_result_decode"
            ),
            Part.SPEC_FORWARD: located(f"{WORKER}:EAGLEWorkerV2.forward_batch_generation"),
            Part.DRAFT: located(f"{TOY}:ToyDecoding.draft"),
            Part.DRAFT_FORWARD: (),
            Part.VERIFY: located(f"{TOY}:ToyDecoding.verify"),
            Part.DRAFT_EXTEND_PREFILL: (),
            Part.DRAFT_EXTEND_DECODE: located(
                f"{WORKER}:EagleDraftWorker._draft_extend_for_decode"
            ),
            # the toy's target worker, under the map's name (the forward never calls it)
            Part.TARGET_FORWARD: located(
                "sglang.srt.managers.tp_worker:TpModelWorker.forward_batch_generation"
            ),
        },
        fallbacks=(Part.DRAFT_EXTEND_DECODE, Part.TARGET_FORWARD),
        missing=(Part.DRAFT_FORWARD, Part.DRAFT_EXTEND_PREFILL),
    )


def test_the_mixin_toy_handles_the_decode_result_in_the_mixin(tmp_path: Path) -> None:
    found = toy_parts("scheduler_mixins", tmp_path)
    assert found.names[Part.DECODE_RESULT] == located(
        "sglang.srt.managers.scheduler_output_processor_mixin:"
        "SchedulerOutputProcessorMixin.process_batch_result_decode"
    )


def test_an_unguarded_decode_result_is_not_located_but_the_map_names_it(tmp_path: Path) -> None:
    found = toy_parts("missing_decode_guard", tmp_path)
    assert found.names[Part.DECODE_RESULT] == located(
        "sglang.srt.managers.scheduler_components.batch_result_processor:"
        "SchedulerBatchResultProcessor.process_batch_result_decode"
    )
    assert found.fallbacks == (Part.DECODE_RESULT, Part.TARGET_FORWARD)
