"""``validate_trace`` on traces whose decisions were carried from the deciding rank
(``sgtrace_payload.carry``): rank 0 records every decision it took, each with the loop iteration
it applied it at; rank 1 records the toggles it received, with its own iteration."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from test_trace_validate import assert_verdict, toy_policy
from tracer_support import EXPECTED_CALLS, Call, write_calls

SCOPE = "5 steps on ranks 0, 1 (8 decisions)"  # rank 0: 5 decisions; rank 1: 1 + 2 toggles


def deciding(calls: Sequence[Call]) -> list[Call]:
    """Rank 0's calls: each decision its own (source rank 0), applied at iteration = step."""
    return [
        (
            step,
            role,
            {**facts, "source_rank": 0, "iteration": step} if role == "decision" else facts,
        )
        for step, role, facts in calls
    ]


def receiving(calls: Sequence[Call], shift: int = 0) -> list[Call]:
    """Rank 1's calls: only the first decision and the toggles, carried from rank 0, the toggles
    applied ``shift`` iterations after rank 0 applied them."""
    out: list[Call] = []
    first = True
    for step, role, facts in deciding(calls):
        if role == "decision":
            if not (facts["changed"] or first):
                continue
            first = False
            if not facts["changed"]:
                out.append((step, role, facts))
                continue
            facts = {**facts, "iteration": int(facts["iteration"]) + shift}  # type: ignore[call-overload]
        out.append((step, role, facts))
    return out


def test_carried_toggles_applied_at_the_deciding_ranks_iterations_pass(tmp_path: Path) -> None:
    trace = write_calls(tmp_path, {0: deciding(EXPECTED_CALLS), 1: receiving(EXPECTED_CALLS)})
    assert_verdict(trace, f"OK: {SCOPE} hold the on/off rules and agree across ranks.")


def test_a_carried_toggle_applied_at_another_iteration_fails_same_iteration(
    tmp_path: Path,
) -> None:
    trace = write_calls(tmp_path, {0: deciding(EXPECTED_CALLS), 1: receiving(EXPECTED_CALLS, 1)})
    expected = (
        f"FAILED: 1 violation in {SCOPE}:\n"
        "  step 4, rank 1 [same-iteration]: expected rank 0's carried decision #2: off of hook "
        "step 2 at iteration 4; seen off of hook step 2 at iteration 5"
    )
    assert_verdict(trace, expected)


def test_a_carried_toggle_that_never_arrived_fails_same_iteration(tmp_path: Path) -> None:
    rank1 = [c for c in receiving(EXPECTED_CALLS) if not (c[1] == "decision" and c[0] == 6)]
    trace = write_calls(tmp_path, {0: deciding(EXPECTED_CALLS), 1: rank1})
    lines = [
        "FAILED: 5 violations in 5 steps on ranks 0, 1 (7 decisions):",
        "  step 6, all ranks [ranks-agree]: expected the same decision on every rank; "
        "seen on at rank 0; off at rank 1",
        "  step 6, rank 1 [off-step]: expected no draft with num_steps > 1, no draft_forward "
        "with num_steps > 1; seen DraftWorker.draft(batch_size=2, num_steps=3, topk=1), "
        "DraftWorker.draft_forward(batch_size=2, num_steps=3)",
        "  step 6, rank 1 [off-step]: expected no verify with draft_width > 1; seen "
        "SpecWorker.verify(batch_size=2, num_steps=3, draft_width=4)",
        "  step 6, rank 1 [off-step]: expected verify with draft_width == 1 or target_forward "
        "with forward_mode == DECODE and is_verify == False; seen none; ran "
        "Scheduler.run_batch, SpecWorker.forward_batch_generation, DraftWorker.draft, "
        "DraftWorker.draft_forward, SpecWorker.verify, TargetWorker.forward_batch_generation, "
        "DraftWorker._draft_extend_for_decode, BatchResultProcessor.process_batch_result_decode",
        "  step 6, rank 1 [same-iteration]: expected rank 0's carried decision #3: on of hook "
        "step 4 at iteration 6; seen none",
    ]
    assert_verdict(trace, "\n".join(lines))


def test_the_policy_replays_the_deciding_ranks_own_decisions_only(tmp_path: Path) -> None:
    trace = write_calls(tmp_path, {0: deciding(EXPECTED_CALLS), 1: receiving(EXPECTED_CALLS)})
    expected = f"OK: {SCOPE} hold the on/off rules, agree across ranks and follow the policy."
    assert_verdict(trace, expected, replay=toy_policy(4))
