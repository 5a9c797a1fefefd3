"""``validate_trace`` on recorded traces (fakeserve, faults on purpose) and synthetic ones.

Each rule has a trace that breaks it; the whole rendered verdict is compared.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from tracer_support import EXPECTED_CALLS, Call, without, write_calls

from sgtrace.errors import ConfigError, SgtraceError, TraceReadError
from sgtrace.payload.record import DecisionRecord
from sgtrace.tracer.events import Role
from sgtrace.tracer.load import hook_off_state, load_trace
from sgtrace.tracer.rules import (
    PLAIN_OFF_STEP_RULES,
    ZERO_STEP_RULES,
    Clause,
    Match,
    Need,
    OffState,
    Rule,
    StepRules,
    step_rules_for,
)
from sgtrace.tracer.steps import trace_steps
from sgtrace.tracer.validate import validate_trace

Recorded = Callable[..., Path]
SCOPE = "5 steps on ranks 0, 1 (10 decisions)"
OFF_STEP_RAN = (
    "Scheduler.run_batch, SpecWorker.forward_batch_generation, DraftWorker.draft, "
    "DraftWorker.draft_forward, SpecWorker.verify, TargetWorker.forward_batch_generation, "
    "DraftWorker._draft_extend_for_decode, BatchResultProcessor.process_batch_result_decode"
)


def assert_verdict(trace_dir: Path, expected: str, **options: object) -> None:
    """The whole rendered verdict; by default with the zero-step rules, as the traces here run
    "off" as upstream's zero-step state does (a one-token verify and a draft extend)."""
    options.setdefault("rules", ZERO_STEP_RULES)
    verdict = validate_trace(trace_dir, **options)  # type: ignore[arg-type]
    assert verdict.render() == expected, f"\nexpected:\n{expected}\nseen:\n{verdict.render()}"
    assert verdict.exit_code == (0 if expected.startswith("OK") else 1)


def test_a_recorded_run_that_keeps_every_rule_passes(recorded: Recorded) -> None:
    expected = f"OK: {SCOPE} hold the on/off rules and agree across ranks."
    assert_verdict(recorded(), expected)


def test_an_off_step_that_still_drafts_fails_off_step(recorded: Recorded) -> None:
    lines = [f"FAILED: 12 violations in {SCOPE}:"]
    for step in (4, 5):
        for rank in (0, 1):
            where = f"  step {step}, rank {rank} [off-step]: expected"
            lines += [
                f"{where} no draft with num_steps > 1, no draft_forward with num_steps > 1; seen "
                "DraftWorker.draft(batch_size=8, num_steps=3, topk=1), "
                "DraftWorker.draft_forward(batch_size=8, num_steps=3)",
                f"{where} no verify with draft_width > 1; seen "
                "SpecWorker.verify(batch_size=8, num_steps=3, draft_width=4)",
                f"{where} verify with draft_width == 1 or target_forward with forward_mode == "
                f"DECODE and is_verify == False; seen none; ran {OFF_STEP_RAN}",
            ]
    assert_verdict(recorded("off-drafts"), "\n".join(lines))


def test_an_off_step_without_draft_extend_fails_draft_state(recorded: Recorded) -> None:
    ran = (
        "Scheduler.run_batch, SpecWorker.forward_batch_generation, SpecWorker.verify, "
        "TargetWorker.forward_batch_generation, BatchResultProcessor.process_batch_result_decode"
    )
    lines = [f"FAILED: 4 violations in {SCOPE}:"] + [
        f"  step {step}, rank {rank} [draft-state]: expected draft_extend_decode; seen none; "
        f"ran {ran}"
        for step in (4, 5)
        for rank in (0, 1)
    ]
    assert_verdict(recorded("off-skips-extend"), "\n".join(lines))


def test_ranks_that_decide_differently_fail_ranks_agree(recorded: Recorded) -> None:
    expected = (
        f"FAILED: 1 violation in {SCOPE}:\n"
        "  step 5, all ranks [ranks-agree]: expected the same decision on every rank; "
        "seen on at rank 1; off at rank 0"
    )
    assert_verdict(recorded("rank1-disagrees"), expected)


def toy_policy(on_at_most: int) -> Callable[[Sequence[DecisionRecord]], list[bool]]:
    def replay(decisions: Sequence[DecisionRecord]) -> list[bool]:
        return [d.batch_size <= on_at_most for d in decisions]

    return replay


def test_decisions_that_follow_the_policy_pass(recorded: Recorded) -> None:
    expected = f"OK: {SCOPE} hold the on/off rules, agree across ranks and follow the policy."
    assert_verdict(recorded(), expected, replay=toy_policy(4))


def test_decisions_the_policy_would_not_make_fail_follows_policy(recorded: Recorded) -> None:
    lines = [f"FAILED: 4 violations in {SCOPE}:"] + [
        f"  step {step}, rank {rank} [follows-policy]: expected on (policy replay); "
        f"seen off (high-load; hook step {step - 2}, batch_size=8, accept_length={accept})"
        for step, accept in ((4, 2.0), (5, 1.0))
        for rank in (0, 1)
    ]
    assert_verdict(recorded(), "\n".join(lines), replay=toy_policy(8))


def test_the_replay_sees_each_ranks_decisions_in_order(recorded: Recorded) -> None:
    seen: list[tuple[int, int, bool, bool]] = []

    def replay(decisions: Sequence[DecisionRecord]) -> list[bool]:
        seen.extend((d.rank, d.step, d.was_on, d.spec_on) for d in decisions)
        return [d.spec_on for d in decisions]

    validate_trace(recorded(), replay=replay)
    per_rank = [(0, True, True), (1, True, True), (2, True, False), (3, False, False),
                (4, False, True)]  # fmt: skip
    assert seen == [(rank, *decision) for rank in (0, 1) for decision in per_rank]


def test_a_replay_of_the_wrong_length_cannot_be_checked(recorded: Recorded) -> None:
    with pytest.raises(SgtraceError, match="returned 0 decisions for 5 steps of rank 0"):
        validate_trace(recorded(), replay=lambda decisions: [])


def both_ranks(calls: list[Call], rank1: list[Call] | None = None) -> dict[int, list[Call]]:
    return {0: calls, 1: list(EXPECTED_CALLS) if rank1 is None else rank1}


def test_an_on_step_without_draft_and_verify_fails_on_step(tmp_path: Path) -> None:
    calls = without(EXPECTED_CALLS, 3, "draft", "draft_forward", "verify")
    ran = (
        "Scheduler.run_batch, SpecWorker.forward_batch_generation, "
        "TargetWorker.forward_batch_generation, DraftWorker._draft_extend_for_decode, "
        "BatchResultProcessor.process_batch_result_decode"
    )
    expected = (
        f"FAILED: 2 violations in {SCOPE}:\n"
        f"  step 3, rank 0 [on-step]: expected draft; seen none; ran {ran}\n"
        f"  step 3, rank 0 [on-step]: expected verify; seen none; ran {ran}"
    )
    assert_verdict(write_calls(tmp_path, both_ranks(calls)), expected)


def test_a_decision_stays_in_force_until_the_next(tmp_path: Path) -> None:
    """Without a decision in step 5, step 4's "off" still governs it: the OFF rules apply."""
    calls = without(EXPECTED_CALLS, 5, "decision")
    expected = (
        "OK: 5 steps on ranks 0, 1 (9 decisions) hold the on/off rules and agree across ranks."
    )
    assert_verdict(write_calls(tmp_path, both_ranks(calls)), expected)


def test_a_rank_without_a_decision_in_force_fails_ranks_agree(tmp_path: Path) -> None:
    calls = without(EXPECTED_CALLS, 2, "decision")
    expected = (
        "FAILED: 1 violation in 5 steps on ranks 0, 1 (9 decisions):\n"
        "  step 2, all ranks [ranks-agree]: expected the same decision on every rank; "
        "seen on at rank 1; no decision yet at rank 0"
    )
    assert_verdict(write_calls(tmp_path, both_ranks(calls)), expected)


def test_two_decisions_for_one_decode_result_fail_one_decision(tmp_path: Path) -> None:
    decision = next(call for call in EXPECTED_CALLS if call[:2] == (2, "decision"))
    calls = list(EXPECTED_CALLS)
    calls.insert(calls.index(decision), (2, "decision", {**decision[2], "spec_on": False}))
    expected = (
        "FAILED: 1 violation in 5 steps on ranks 0, 1 (11 decisions):\n"
        "  step 2, rank 0 [one-decision]: expected one decision per decode result; seen 2 "
        "(off, on)"
    )
    assert_verdict(write_calls(tmp_path, both_ranks(calls)), expected)


def test_a_decision_on_arrivals_beside_the_results_decision_is_not_a_twin(tmp_path: Path) -> None:
    """A decision on requests arriving carries the next result's hook step; it may differ
    from that result's own decision (the last one decided governs the launch)."""
    decision = next(call for call in EXPECTED_CALLS if call[:2] == (2, "decision"))
    calls = list(EXPECTED_CALLS)
    arrival = {**decision[2], "spec_on": False, "changed": True, "arriving": 3}
    arrival.pop("accept_length", None)
    calls.insert(calls.index(decision), (2, "decision", arrival))
    expected = (
        "OK: 5 steps on ranks 0, 1 (11 decisions) hold the on/off rules and agree across ranks."
    )
    assert_verdict(write_calls(tmp_path, both_ranks(calls)), expected)


def test_two_agreeing_decisions_in_one_step_are_sound(tmp_path: Path) -> None:
    """Overlap scheduling can process two results between two launches (seen live)."""
    decision = next(call for call in EXPECTED_CALLS if call[:2] == (2, "decision"))
    calls = list(EXPECTED_CALLS)
    calls.insert(calls.index(decision), (2, "decision", dict(decision[2])))
    expected = (
        "OK: 5 steps on ranks 0, 1 (11 decisions) hold the on/off rules and agree across ranks."
    )
    assert_verdict(write_calls(tmp_path, both_ranks(calls)), expected)


def test_a_missing_decision_at_the_last_step_is_a_cut_trace_not_a_disagreement(
    tmp_path: Path,
) -> None:
    calls = [call for call in EXPECTED_CALLS if call[0] != 6]
    expected = (
        "OK: 5 steps on ranks 0, 1 (9 decisions) hold the on/off rules and agree across ranks."
    )
    assert_verdict(write_calls(tmp_path, both_ranks(calls)), expected)


def test_an_off_step_running_a_plain_decode_passes(tmp_path: Path) -> None:
    plain = {"batch_size": 8, "forward_mode": "DECODE", "is_verify": False}
    calls = []
    for call in EXPECTED_CALLS:
        if call[0] in (4, 5) and call[1] == "verify":
            continue
        if call[0] in (4, 5) and call[1] == "target_forward":
            call = (call[0], call[1], plain)
        calls.append(call)
    expected = f"OK: {SCOPE} hold the on/off rules and agree across ranks."
    assert_verdict(write_calls(tmp_path, both_ranks(calls, calls)), expected)


def test_a_hook_can_describe_its_own_off_step(recorded: Recorded) -> None:
    """A hook whose OFF skips the draft extend says so; the same trace then passes."""
    off = tuple(c for c in ZERO_STEP_RULES.off if c.rule is not Rule.DRAFT_STATE)
    rules = StepRules.from_dict(StepRules(ZERO_STEP_RULES.on, off).to_dict())
    expected = f"OK: {SCOPE} hold the on/off rules and agree across ranks."
    assert_verdict(recorded("off-skips-extend"), expected, rules=rules)


def test_rules_round_trip_and_bad_rules_are_refused() -> None:
    assert StepRules.from_dict(ZERO_STEP_RULES.to_dict()) == ZERO_STEP_RULES
    clause = Clause(Rule.ON_STEP, Need.MUST_RUN, (Match(Role.DRAFT), Match(Role.VERIFY)))
    assert clause.expected() == "draft or verify"
    with pytest.raises(ConfigError, match="step rules are invalid"):
        StepRules.from_dict({"on": [{"rule": "on-step", "need": "maybe", "any_of": []}], "off": []})


def test_a_trace_without_decisions_cannot_be_validated(tmp_path: Path) -> None:
    calls = [call for call in EXPECTED_CALLS if call[1] != "decision"]
    with pytest.raises(TraceReadError, match="no decisions in .*decision record was not recorded"):
        validate_trace(write_calls(tmp_path, {0: calls}))


def test_a_malformed_line_is_skipped_with_a_warning_naming_file_and_line(tmp_path: Path) -> None:
    write_calls(tmp_path, {0: EXPECTED_CALLS})
    path = tmp_path / "events-100.jsonl"
    lines = path.read_text().splitlines()
    lines[3] = lines[3].replace('"t0"', '"t_zero"')
    path.write_text("\n".join(lines) + "\n")
    record = json.loads(lines[3])
    expected = (
        "OK: 5 steps on rank 0 (5 decisions) hold the on/off rules and agree across ranks.\n"
        f"note: warning: {path}:4: skipped: cannot read the record: malformed call record "
        f"('t0'): {record!r}"
    )
    assert_verdict(tmp_path, expected)


def test_an_unfinished_last_line_is_skipped_with_a_note(tmp_path: Path) -> None:
    write_calls(tmp_path, both_ranks(list(EXPECTED_CALLS)))
    with (tmp_path / "events-101.jsonl").open("a") as fh:
        fh.write('{"type":"call","fn":"fakeserve.sch')
    verdict = validate_trace(tmp_path, rules=ZERO_STEP_RULES)
    assert verdict.is_valid
    assert verdict.notes == (
        "events-101.jsonl: last line unfinished (process killed while writing)",
    )


def test_a_directory_without_events_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(TraceReadError, match="no events-\\*.jsonl in"):
        validate_trace(tmp_path)
    with pytest.raises(TraceReadError, match="is not a directory"):
        validate_trace(tmp_path / "missing")


OVERLAP_PLAN = "2,2,8,8,8,2,2"  # decode steps 2-8


def test_a_decision_made_after_a_result_governs_the_next_launch(recorded: Recorded) -> None:
    """As sgtrace's hook in SGLang with the overlap scheduler: the result of step N is handled
    after step N+1 was launched, so its decision first governs step N+2."""
    trace_dir = recorded(plan=OVERLAP_PLAN, decide="after-result")
    records = [r for r in trace_steps(load_trace(trace_dir)) if r.rank == 0 and r.is_decode]
    governing = [
        (r.step, None if r.governing is None else (r.governing.record.step, r.governing.state))
        for r in records
    ]
    assert governing == [
        (2, None), (3, None), (4, (0, "on")), (5, (1, "on")), (6, (2, "off")), (7, (3, "off")),
        (8, (4, "off")),
    ]  # fmt: skip
    expected = (
        "OK: 5 steps on ranks 0, 1 (14 decisions) hold the on/off rules and agree across ranks."
    )
    assert_verdict(trace_dir, expected)


def test_an_off_step_that_drafts_is_caught_with_overlap_scheduling(recorded: Recorded) -> None:
    trace_dir = recorded("off-drafts", plan=OVERLAP_PLAN, decide="after-result")
    verdict = validate_trace(trace_dir, rules=ZERO_STEP_RULES)
    assert sorted({(v.step, v.rank, v.rule) for v in verdict.violations}) == [
        (step, rank, Rule.OFF_STEP) for step in (6, 7, 8) for rank in (0, 1)
    ]


def test_decisions_without_any_decode_step_cannot_be_validated(tmp_path: Path) -> None:
    calls = [call for call in EXPECTED_CALLS if call[1] == "decision"]
    with pytest.raises(TraceReadError, match="5 decisions in .* but no decode step they govern"):
        validate_trace(write_calls(tmp_path, {0: calls}))


def plain_off_steps(calls: list[Call], steps: tuple[int, ...] = (4, 5)) -> list[Call]:
    """The calls with ``steps`` run as the plain off state runs them: the scheduler calls the
    target worker's plain DECODE forward, no speculative worker, draft, verify or draft extend."""
    plain = {"batch_size": 8, "forward_mode": "DECODE", "is_verify": False}
    dropped = {"spec_forward", "draft", "draft_forward", "verify", "draft_extend_decode"}
    out: list[Call] = []
    for call in calls:
        if call[0] in steps and call[1] in dropped:
            continue
        out.append(
            (call[0], call[1], plain) if call[0] in steps and call[1] == "target_forward" else call
        )
    return out


def test_plain_off_steps_pass_the_plain_rules_and_fail_the_zero_step_ones(tmp_path: Path) -> None:
    calls = plain_off_steps(EXPECTED_CALLS)
    trace = write_calls(tmp_path, both_ranks(calls, calls))
    assert_verdict(
        trace,
        f"OK: {SCOPE} hold the on/off rules and agree across ranks.",
        rules=PLAIN_OFF_STEP_RULES,
    )
    # the zero-step rules want the draft kept current
    zero_step = validate_trace(trace, rules=ZERO_STEP_RULES)
    assert zero_step.violations and {v.rule for v in zero_step.violations} == {Rule.DRAFT_STATE}
    # without a hook config beside the trace: the plain off state's rules, the hook's own
    assert validate_trace(trace).is_valid


def test_a_plain_off_step_that_still_verifies_fails_the_plain_rules(recorded: Recorded) -> None:
    """A zero-step off (a one-token verify and a draft extend) is not the plain off state."""
    verdict = validate_trace(recorded(), rules=PLAIN_OFF_STEP_RULES)
    assert sorted({(v.step, v.rule.value) for v in verdict.violations}) == [
        (4, "off-step"),
        (5, "off-step"),
    ]


def test_the_off_state_is_read_from_the_hook_config_beside_the_trace(tmp_path: Path) -> None:
    config = tmp_path / "sgtrace_hook.json"
    assert hook_off_state(tmp_path) is OffState.PLAIN  # none: this hook's only off state
    config.write_text(json.dumps({"options": {"log_measurements": False, "off_state": "plain"}}))
    assert step_rules_for(hook_off_state(tmp_path)) is PLAIN_OFF_STEP_RULES
    # hooks before the plain off state wrote no off state (their off was the zero-step one)
    for older in ({"options": {"off_kernel": "decode", "off_step": "lean"}}, {}):
        config.write_text(json.dumps(older))
        assert step_rules_for(hook_off_state(tmp_path)) is ZERO_STEP_RULES
    config.write_text("{")
    with pytest.raises(TraceReadError, match="cannot read the hook's off state.*--off-state"):
        hook_off_state(tmp_path)


def test_validate_holds_a_trace_to_the_rules_its_hook_config_names(recorded: Recorded) -> None:
    """A zero-step off (a one-token verify, a draft extend) passes where the config beside the
    trace says the hook's off was the zero-step state, and fails the plain rules otherwise."""
    trace_dir = recorded()
    assert {v.rule for v in validate_trace(trace_dir).violations} == {Rule.OFF_STEP}
    (trace_dir / "sgtrace_hook.json").write_text(json.dumps({"options": {}}))  # an older hook
    assert validate_trace(trace_dir).is_valid
