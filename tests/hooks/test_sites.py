"""Locating the hook's sites in toy SGLang trees (one per family): targets, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from hook_support import toy_spec, toy_tree

from sgtrace.errors import HookSiteNotFoundError
from sgtrace.names import QualName
from sgtrace.sglang.family import Family

WORKER = "sglang.srt.speculative.eagle_worker_v2"
SCHEDULER = "sglang.srt.managers.scheduler"
SWITCH = QualName(SCHEDULER, "Scheduler.get_new_batch_prefill")
DOES = (
    "switches: off runs SGLang's plain decode path (the target's DECODE CUDA graphs, no draft); "
    f"a switch re-admits the running requests before {SWITCH}"
)


def test_zero_step_release_locates_every_site_and_switches(tmp_path: Path) -> None:
    spec = toy_spec(toy_tree("zero_step_states", tmp_path))
    assert spec.summary() == "\n".join(
        [
            f"sgtrace hook sites in dir:{tmp_path}:",
            "  decide: self.batch_result_processor.process_batch_result_decode(batch, result) in "
            f"{SCHEDULER}:Scheduler.process_batch_result (sglang/srt/managers/scheduler.py:43)",
            f"  switch: start of get_new_batch_prefill in {SWITCH} "
            "(sglang/srt/managers/scheduler.py:32)",
            f"  attach: end of __init__ in {WORKER}:EAGLEWorkerV2.__init__ "
            "(sglang/srt/speculative/eagle_worker_v2.py:18)",
            "  family: zero-step-states (activate_step_by_batch runs before launch in the decode "
            "branch; upstream's zero-step state (a one-token verify, _build_trivial_verify_input) "
            "is one of its runtime states)",
        ]
    )
    assert spec.does() == DOES
    assert spec.decide.target == QualName(
        "sglang.srt.managers.scheduler_components.batch_result_processor",
        "SchedulerBatchResultProcessor.process_batch_result_decode",
    )
    assert spec.decide.guard == "batch.forward_mode.is_decode()"
    assert [str(name) for name in spec.required] == [
        "sglang.srt.managers.scheduler_components.batch_result_processor:"
        "SchedulerBatchResultProcessor.process_batch_result_decode",
        f"{WORKER}:EAGLEWorkerV2.__init__",
    ]
    # the release's own names: its output streamer component, its capture method
    assert (spec.plain_names.output_module, spec.plain_names.output_qualname) == (
        "sglang.srt.managers.scheduler_components.output_streamer",
        "SchedulerOutputStreamer.stream_output",
    )
    assert spec.plain_names.capture_decode == "init_decode_cuda_graph"


def test_mixin_release_wraps_the_mixin_and_switches_as_the_newest(tmp_path: Path) -> None:
    spec = toy_spec(toy_tree("scheduler_mixins", tmp_path))
    assert spec.family is Family.SCHEDULER_MIXINS
    assert spec.family_reason == (
        "the decode branch of EAGLEWorkerV2.forward_batch_generation has no "
        "activate_step_by_batch call (upstream runtime states: 0.5.13+, zero-step state: 0.5.14+)"
    )
    assert spec.decide.target == QualName(
        "sglang.srt.managers.scheduler_output_processor_mixin",
        "SchedulerOutputProcessorMixin.process_batch_result_decode",
    )
    assert (spec.switch.target, spec.does()) == (SWITCH, DOES)
    assert [str(name) for name in spec.required] == [
        "sglang.srt.managers.scheduler_output_processor_mixin:"
        "SchedulerOutputProcessorMixin.process_batch_result_decode",
        f"{WORKER}:EAGLEWorkerV2.__init__",
    ]
    # until 0.5.12 the scheduler streams its outputs itself, through the mixin
    assert spec.plain_names.output_qualname == "SchedulerOutputProcessorMixin.stream_output"


def test_release_without_zero_step_verify_switches_as_the_newest(tmp_path: Path) -> None:
    spec = toy_spec(toy_tree("no_zero_step", tmp_path))
    assert spec.family is Family.RUNTIME_STATES
    assert spec.family_reason == (
        "the decode branch of EAGLEWorkerV2.forward_batch_generation never calls "
        "_build_trivial_verify_input: no zero-step state (added in 0.5.14)"
    )
    assert (spec.switch.target, spec.does()) == (SWITCH, DOES)


def test_a_release_lacking_a_name_of_the_plain_off_state_gets_no_hook(tmp_path: Path) -> None:
    """It would switch half: the error names each name it lacks and where the map looks."""
    tree = toy_tree("zero_step_states", tmp_path)
    scheduler = tmp_path / "sglang/srt/managers/scheduler.py"
    scheduler.write_text(
        scheduler.read_text().replace("def get_new_batch_prefill(", "def schedule_prefill(")
    )
    (tmp_path / "sglang/srt/mem_cache/common.py").unlink()
    with pytest.raises(HookSiteNotFoundError) as caught:
        toy_spec(tree)
    assert str(caught.value) == (
        f"dir:{tmp_path}: the hook's off state (SGLang's plain decode path) is not mapped on "
        "this release, so no hook is written (it would switch half): it lacks "
        f"switch_qualname: Scheduler.get_new_batch_prefill (a method of {SCHEDULER}:Scheduler); "
        "release_module: sglang.srt.mem_cache.common (a module); "
        "release_kv: release_kv_cache (a binding of sglang.srt.mem_cache.common); "
        "release_insert_kw: is_insert (a parameter of sglang.srt.mem_cache.common:"
        "release_kv_cache) or checkpoint (a parameter of sglang.srt.mem_cache.common:"
        "release_kv_cache). sgtrace knows SGLang 0.5.9 to 0.5.23; check the --source release"
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


def test_missing_worker_is_refused_naming_the_decode_branch_site(tmp_path: Path) -> None:
    tree = toy_tree("zero_step_states", tmp_path)
    (tmp_path / "sglang/srt/speculative/eagle_worker_v2.py").write_text("class Other:\n    pass\n")
    with pytest.raises(HookSiteNotFoundError) as caught:
        toy_spec(tree)
    assert str(caught.value) == (
        "decode-branch site: no EAGLEWorkerV2.forward_batch_generation in "
        f"sglang.srt.speculative.eagle_worker_v2 of dir:{tmp_path}; sgtrace knows SGLang 0.5.9 "
        "to 0.5.23, check the --source release"
    )
