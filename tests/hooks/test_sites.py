"""Locating the hook's sites in toy SGLang trees (one per family): targets, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from hook_support import toy_spec, toy_tree

from sgtrace.errors import HookSiteNotFoundError
from sgtrace.names import QualName
from sgtrace.sglang.family import Family

WORKER = "sglang.srt.speculative.eagle_worker_v2"


def test_zero_step_release_locates_every_site_and_switches(tmp_path: Path) -> None:
    spec = toy_spec(toy_tree("zero_step_states", tmp_path))
    assert spec.summary() == "\n".join(
        [
            f"sgtrace hook sites in dir:{tmp_path}:",
            "  decide: self.batch_result_processor.process_batch_result_decode(batch, result) in "
            "sglang.srt.managers.scheduler:Scheduler.process_batch_result "
            "(sglang/srt/managers/scheduler.py:23)",
            "  switch: self.activate_step_by_batch(len(batch.reqs)) in "
            f"{WORKER}:EAGLEWorkerV2.forward_batch_generation "
            "(sglang/srt/speculative/eagle_worker_v2.py:45)",
            f"  attach: end of __init__ in {WORKER}:EAGLEWorkerV2.__init__ "
            "(sglang/srt/speculative/eagle_worker_v2.py:19)",
            "  family: zero-step-states (activate_step_by_batch runs before launch in the decode "
            "branch; the zero-step state (one-token verify + draft extend) is pre-built at "
            "start-up)",
        ]
    )
    assert spec.decide.target == QualName(
        "sglang.srt.managers.scheduler_components.batch_result_processor",
        "SchedulerBatchResultProcessor.process_batch_result_decode",
    )
    assert spec.decide.guard == "batch.forward_mode.is_decode()"
    assert spec.switch.guard == "not (batch.forward_mode.is_extend() or batch.is_extend_in_batch)"
    assert [str(name) for name in spec.required] == [
        "sglang.srt.managers.scheduler_components.batch_result_processor:"
        "SchedulerBatchResultProcessor.process_batch_result_decode",
        "sglang.srt.speculative.adaptive_spec_params:adaptive_unsupported_reason",
        f"{WORKER}:EAGLEWorkerV2.__init__",
        f"{WORKER}:EAGLEWorkerV2._build_trivial_verify_input",
        f"{WORKER}:EAGLEWorkerV2.activate_step_by_batch",
        f"{WORKER}:EAGLEWorkerV2.apply_runtime_state",
        f"{WORKER}:EAGLEWorkerV2.build_adaptive_runtime_state",
        f"{WORKER}:EAGLEWorkerV2.init_cuda_graphs",
    ]


def test_mixin_release_is_observe_only_and_wraps_the_mixin(tmp_path: Path) -> None:
    spec = toy_spec(toy_tree("mixin_observe_only", tmp_path))
    assert spec.family is Family.SCHEDULER_MIXINS
    assert spec.family_reason == (
        "the decode branch of EAGLEWorkerV2.forward_batch_generation has no "
        "activate_step_by_batch call (upstream runtime states: 0.5.13+, zero-step state: 0.5.14+)"
    )
    assert spec.decide.target == QualName(
        "sglang.srt.managers.scheduler_output_processor_mixin",
        "SchedulerOutputProcessorMixin.process_batch_result_decode",
    )
    assert spec.switch.text == "return self.verify(batch, drafts)"
    assert [str(name) for name in spec.required] == [
        "sglang.srt.managers.scheduler_output_processor_mixin:"
        "SchedulerOutputProcessorMixin.process_batch_result_decode",
        f"{WORKER}:EAGLEWorkerV2.__init__",
    ]


def test_release_without_zero_step_verify_is_observe_only(tmp_path: Path) -> None:
    spec = toy_spec(toy_tree("no_zero_step", tmp_path))
    assert spec.family is Family.RUNTIME_STATES
    assert spec.switch.text == "self.activate_step_by_batch(len(batch.reqs))"
    assert spec.family_reason == (
        "the decode branch of EAGLEWorkerV2.forward_batch_generation never calls "
        "_build_trivial_verify_input: no zero-step state (added in 0.5.14)"
    )


def test_unguarded_decode_result_is_refused_naming_what_was_found(tmp_path: Path) -> None:
    with pytest.raises(HookSiteNotFoundError) as caught:
        toy_spec(toy_tree("missing_decode_guard", tmp_path))
    assert str(caught.value) == (
        "decide site: expected one call to process_batch_result_decode guarded by is_decode() in "
        f"Scheduler.process_batch_result of dir:{tmp_path}, found 0; found instead: "
        "self.batch_result_processor.process_batch_result_decode(batch, result) "
        "(line 21, guard None)"
    )


def test_missing_worker_is_refused_naming_the_switch_site(tmp_path: Path) -> None:
    tree = toy_tree("zero_step_states", tmp_path)
    (tmp_path / "sglang/srt/speculative/eagle_worker_v2.py").write_text("class Other:\n    pass\n")
    with pytest.raises(HookSiteNotFoundError) as caught:
        toy_spec(tree)
    assert str(caught.value) == (
        "switch site: no EAGLEWorkerV2.forward_batch_generation in "
        f"sglang.srt.speculative.eagle_worker_v2 of dir:{tmp_path}; sgtrace knows SGLang 0.5.9 "
        "to 0.5.23, check the --source release"
    )
