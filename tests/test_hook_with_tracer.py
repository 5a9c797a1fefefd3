"""The hook and the tracer in one directory, in one real process: they must compose.

Both install a ``sys.meta_path`` finder that wraps the other finders; each must ask only the
finders after itself, or the two ask each other forever (this was found on a live server).
"""

from __future__ import annotations

from pathlib import Path

from sgtrace.graphs.build import Project
from sgtrace.hooks.apply import generate_runtime_hook
from sgtrace.hooks.replay import policy_replay
from sgtrace.payload.policy import PolicyConfig
from sgtrace.tracer.launch import prepare_trace_dir
from sgtrace.tracer.load import load_trace
from sgtrace.tracer.selection import HOOK_DECISION
from sgtrace.tracer.static import selection_from_source
from sgtrace.tracer.steps import decisions_of
from tests.hooks.hook_support import (
    BATCH_SIZE_POLICY,
    STEP_COST,
    assert_toggles,
    run_fake_server,
    toy_spec,
    toy_tree,
)


def test_hook_and_tracer_in_one_directory(tmp_path: Path) -> None:
    tree = toy_tree("zero_step_states", tmp_path / "toy")
    out = tmp_path / "hook"
    generate_runtime_hook(tree, out, BATCH_SIZE_POLICY, toy_spec(tree))
    static = selection_from_source(Project(tree, use_cache=False))
    prepare_trace_dir(out, static.selection)

    run = run_fake_server([out, tree.root], "--phases", "1x40,64x40,1x40")

    assert_toggles(run, [(40, 64, "off", "high-load"), (80, 1, "on", "low-load")])
    assert run.report["outputs_ok"] is True
    trace = load_trace(out)
    ran = sorted({e.function.qualname for e in trace.events})
    assert [e.function for e in trace.events].count(HOOK_DECISION) == 120
    assert ran == [
        "DecisionLog.record",
        "EAGLEWorkerV2.forward_batch_generation",
        "Scheduler.run_batch",
        "SchedulerBatchResultProcessor.process_batch_result_decode",
        "ToyDecoding.draft",
        "ToyDecoding.verify",
        "TpModelWorker.forward_batch_generation",  # while off: the plain decode path
    ]
    # while off the scheduler runs the target itself: the 40 plain decode steps, the prefill of
    # the requests retracted at the switch and that of the third phase's request, which arrived
    # while off
    target = [e for e in trace.events if e.function.qualname.startswith("TpModelWorker.")]
    assert len(target) == run.report["launched_steps"].count(0) + 2 == 42


def test_a_measuring_hook_traced_replays_from_the_recorded_step_periods(tmp_path: Path) -> None:
    measure = PolicyConfig(measure=True, measure_steps=8, measure_s=0.01, remeasure_s=100.0)
    tree = toy_tree("zero_step_states", tmp_path / "toy")
    out = tmp_path / "hook"
    generate_runtime_hook(tree, out, measure, toy_spec(tree))
    static = selection_from_source(Project(tree, use_cache=False))
    prepare_trace_dir(out, static.selection)
    phases = ("--phases", "1x60,64x60,1x60", "--good-draft")
    run = run_fake_server([out, tree.root], *phases, "--step-cost", STEP_COST)

    assert {reason for *_, reason in run.toggles} == {"explore", "measured"}
    decisions = [d.record for d in decisions_of(load_trace(out).events)]
    untimed = [i for i, d in enumerate(decisions) if d.step_period_s is None]
    switched = [step + 2 for step, *_ in run.toggles]  # the first result after each switch
    assert len(decisions) == 180 and untimed == sorted([0, 60, 120, *switched])
    # what validate --policy replays: the traced decisions, step periods included
    assert policy_replay(measure)(decisions) == [d.spec_on for d in decisions]
    # a policy that does not measure decides otherwise on the same trace
    assert policy_replay(BATCH_SIZE_POLICY)(decisions) != [d.spec_on for d in decisions]
