"""The hook inside a running toy server: decisions, the switch to and from the plain decode
path, every rank alike.

Each run is a fresh interpreter (tests/hooks/fake_server.py) started with the hook on
PYTHONPATH, as SGLang's scheduler processes are: the runtime directory's ``sitecustomize``
installs the hook, which patches the toy SGLang when it is imported. The toy's target runs a
decode step only on DECODE graphs and a verify only on TARGET_VERIFY ones, allocates KV slots
and fails on one allocated twice, so a switch that forgot a part fails the run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hook_support import (
    BATCH_SIZE_POLICY,
    STEP_COST,
    assert_toggles,
    run_fake_server,
    toy_spec,
    toy_tree,
)

from sgtrace.hooks.apply import generate_runtime_hook, patch_source
from sgtrace.payload.config import DEFAULT_OPTIONS, HookOptions
from sgtrace.payload.facts import accept_lengths
from sgtrace.payload.policies import replay
from sgtrace.payload.policy import Observation, PolicyConfig, PolicyKind

LOAD_1_64_1 = ("--phases", "1x40,64x40,1x40")


@pytest.fixture
def toy_release(tmp_path: Path):
    """``toy_release(case, policy, options)`` -> PYTHONPATH of a runtime hook directory + the
    toy tree."""

    def make(case: str, policy: PolicyConfig, options: HookOptions = DEFAULT_OPTIONS) -> list[Path]:
        tree = toy_tree(case, tmp_path / case)
        out = tmp_path / f"hook-{case}"
        generate_runtime_hook(tree, out, policy, toy_spec(tree), options)
        return [out, tree.root]

    return make


def test_batch_size_policy_turns_speculation_off_under_load_and_back_on(toy_release) -> None:
    run = run_fake_server(toy_release("zero_step_states", BATCH_SIZE_POLICY), *LOAD_1_64_1)
    assert_toggles(run, [(40, 64, "off", "high-load"), (80, 1, "on", "low-load")])
    # decided on the result of decode step 40, switched two launches later (overlap: the next
    # batch was launched before that result was processed), then the retracted requests are
    # prefilled again and decode on the target's DECODE graphs
    assert run.report["launched_steps"] == [3] * 42 + [0] * 40 + [3] * 38
    assert run.report["outputs_ok"] is True  # token for token the target's own sequence
    assert run.report["kv_held"] == []  # every slot given back: no retraction leaked
    assert run.report["captured"] == ["launch"]  # nothing of upstream's states is built
    assert run.hook_lines == [
        "sgtrace-hook attached rank=0 worker=EAGLEWorkerV2 (off = plain decode, switching by "
        "re-admitting the running requests)",
        "sgtrace-hook plain off state ready: the target's DECODE graphs captured; off swaps "
        "the model runner's attn_backend, graph_runner, spec_algorithm and the scheduler's "
        "future map",
        "sgtrace-hook toggle step=40 rank=0 batch_size=64 spec=off reason=high-load",
        "sgtrace-hook switched spec=off (plain off state): 64 running requests retracted",
        "sgtrace-hook toggle step=80 rank=0 batch_size=1 spec=on reason=low-load",
        "sgtrace-hook switched spec=on (plain off state): 1 running requests retracted",
    ]


@pytest.mark.parametrize("case", ["scheduler_mixins", "no_zero_step"])
def test_every_release_shape_switches_as_the_newest(toy_release, case: str) -> None:
    """0.5.9-0.5.12 (results through a Scheduler mixin, no runtime states) and 0.5.13 (runtime
    states, no zero-step state) switch through the plain decode path as 0.5.14+ does."""
    newest = run_fake_server(toy_release("zero_step_states", BATCH_SIZE_POLICY), *LOAD_1_64_1)
    run = run_fake_server(toy_release(case, BATCH_SIZE_POLICY), *LOAD_1_64_1)
    assert_toggles(run, [(40, 64, "off", "high-load"), (80, 1, "on", "low-load")])
    assert run.report["launched_steps"] == newest.report["launched_steps"]
    assert (run.report["outputs_ok"], run.report["kv_held"]) == (True, [])
    assert run.hook_lines == newest.hook_lines


def test_outputs_keep_the_launched_servers_metrics_while_off(toy_release) -> None:
    """Until 0.5.12 the scheduler streams its outputs itself and reads its own algorithm, NONE
    while off: the hook shows it the launched one there, as the tokenizer manager expects."""
    run = run_fake_server(toy_release("scheduler_mixins", BATCH_SIZE_POLICY), "--phases", "64x20")
    assert run.report["launched_steps"][-1] == 0  # off for most of the run
    assert run.report["streamed"] == ["eagle3"]


def test_every_rank_takes_the_same_decisions(toy_release) -> None:
    path = toy_release("zero_step_states", BATCH_SIZE_POLICY)
    ranks = [run_fake_server(path, *LOAD_1_64_1, "--rank", str(rank)) for rank in (0, 1)]
    decisions = [[d[:1] + d[2:] for d in run.report["decisions"]] for run in ranks]
    assert decisions[0] == decisions[1]
    assert [d[1] for d in ranks[1].report["decisions"]] == [1] * 120
    assert ranks[0].report["launched_steps"] == ranks[1].report["launched_steps"]


def test_default_policy_switches_off_a_draft_that_accepts_nothing(toy_release) -> None:
    run = run_fake_server(
        toy_release("zero_step_states", PolicyConfig(kind=PolicyKind.THRESHOLD)),
        "--phases",
        "1x100",
    )
    assert_toggles(run, [(31, 1, "off", "low-acceptance")])
    assert run.report["launched_steps"] == [3] * 33 + [0] * 67
    assert run.report["outputs_ok"] is True
    accepts = {d[6] for d in run.report["decisions"][:32]}
    assert accepts == {1.0}


def test_default_policy_keeps_a_good_draft_on(toy_release) -> None:
    run = run_fake_server(
        toy_release("zero_step_states", PolicyConfig(kind=PolicyKind.THRESHOLD)),
        "--phases",
        "1x100",
        "--good-draft",
    )
    assert_toggles(run, [])
    assert run.report["launched_steps"] == [3] * 100
    assert run.report["tokens"] == 1 + 4 * 100
    assert {d[6] for d in run.report["decisions"]} == {4.0}


def test_upstream_adaptive_keeps_the_switch_and_the_hook_only_observes(toy_release) -> None:
    run = run_fake_server(
        toy_release("zero_step_states", PolicyConfig(kind=PolicyKind.THRESHOLD)),
        "--phases",
        "1x40",
        "--adaptive",
    )
    assert run.hook_lines == [
        "sgtrace-hook rank=0: observe only: --speculative-adaptive is on: upstream's controller "
        "owns the switch",
        "sgtrace-hook toggle step=31 rank=0 batch_size=1 spec=off reason=low-acceptance applied=no",
    ]
    # what hook_lines leaves out: a long garbage collection of the host, if one came (costs.py)
    assert all(" cost: garbage collection of generation " in line for line in run.cost_lines)
    assert run.report["launched_steps"] == [3] * 40  # the hook's "off" was not applied
    # upstream's controller builds its states (its zero-step state among them)
    assert run.report["captured"] == ["launch", "steps=0 bs=None", "steps=1 bs=None"]


def test_dp_attention_keeps_speculation_on_and_the_hook_only_observes(toy_release) -> None:
    """Every DP rank schedules its own batch and SGLang syncs their forward modes: the hook
    refuses to switch (ranks deciding apart would mix speculative and plain forwards)."""
    run = run_fake_server(
        toy_release("zero_step_states", BATCH_SIZE_POLICY), *LOAD_1_64_1, "--dp-attention"
    )
    assert run.hook_lines == [
        "sgtrace-hook rank=0: observe only: DP attention is on: every DP rank schedules its own "
        "batch and SGLang syncs their forward modes each step, so ranks switching at different "
        "steps would mix speculative and plain forwards; the hook only observes",
        "sgtrace-hook toggle step=40 rank=0 batch_size=64 spec=off reason=high-load applied=no",
        "sgtrace-hook toggle step=80 rank=0 batch_size=1 spec=on reason=low-load applied=no",
    ]
    assert run.report["launched_steps"] == [3] * 120  # the load rule's "off" was not applied


def test_uninstall_restores_every_patched_function(toy_release) -> None:
    run = run_fake_server(
        toy_release("zero_step_states", BATCH_SIZE_POLICY), "--phases", "64x20", "--uninstall"
    )
    assert run.report["launched_steps"][-1] == 0
    assert run.report["uninstalled"] == {
        "decode_wrapped": False,
        "init_wrapped": False,
        "prefill_wrapped": False,
        "result_wrapped": False,
        "finders": [],
    }


def test_patched_source_behaves_like_the_runtime_directory(tmp_path: Path, toy_release) -> None:
    tree = toy_tree("zero_step_states", tmp_path / "patched")
    patch_source(tree, BATCH_SIZE_POLICY, write=True, spec=toy_spec(tree))
    patched = run_fake_server([tree.root], *LOAD_1_64_1, "--payload", "sglang.sgtrace_payload")
    runtime = run_fake_server(toy_release("zero_step_states", BATCH_SIZE_POLICY), *LOAD_1_64_1)
    assert patched.report == runtime.report
    assert patched.hook_lines == runtime.hook_lines


def test_a_result_that_drafted_nothing_reports_no_accept_lengths() -> None:
    class Result:
        def __init__(self, width: int | None, lens: list[int] | None) -> None:
            self.speculative_num_draft_tokens = width
            self.accept_lens = lens

    assert accept_lengths(Result(None, None)) is None  # a plain decode (the hook's off)
    assert accept_lengths(Result(1, [1, 1])) is None  # upstream's own zero-step verify
    assert accept_lengths(Result(4, [1, 3, 0])) == (1.0, 3.0)
    assert accept_lengths(Result(4, [0])) is None


def test_recorded_decisions_replay_exactly_through_the_policy(toy_release) -> None:
    policy = PolicyConfig(
        kind=PolicyKind.THRESHOLD, min_dwell_steps=8, min_accept_samples=8, probe_interval_steps=16
    )
    run = run_fake_server(toy_release("zero_step_states", policy), "--phases", "1x60,64x30,1x60")
    recorded = run.report["decisions"]
    spec_on = [True] + [on for _step, _rank, _size, on, *_ in recorded[:-1]]
    observations = [
        Observation(step, size, None if accept is None else (accept,), previous, period)
        for (step, _rank, size, _on, _changed, _reason, accept, period, *_), previous in zip(
            recorded, spec_on, strict=True
        )
    ]
    replayed = [
        [d.step, 0, d.batch_size, d.spec_on, d.changed, d.reason.value]
        for d in replay(policy, observations)
    ]
    assert replayed == [d[:6] for d in recorded]
    assert {d[5] for d in recorded} >= {"low-acceptance", "probe"}
    assert {d[7] for d in recorded} == {None}  # not timed: the policy does not measure


MEASURE = PolicyConfig(measure=True, measure_steps=8, measure_s=0.01, remeasure_s=100.0)


def test_a_measuring_policy_finds_the_better_state_at_each_batch_size(toy_release) -> None:
    run = run_fake_server(
        toy_release("zero_step_states", MEASURE, HookOptions(log_measurements=True)),
        *("--phases", "1x60,64x60,1x60", "--good-draft", "--step-cost", f"{STEP_COST},0.05"),
    )
    recorded = run.report["decisions"]
    periods = [d[7] for d in recorded]
    # untimed: the first result, the first of each phase (its extend batch ran between), and
    # the first after each switch, two results after the decision (the retracted requests'
    # prefill ran between)
    switched = [step + 2 for step, *_ in run.toggles]
    assert [i for i, p in enumerate(periods) if p is None] == sorted([0, 60, 120, *switched])
    assert all(p > 0 for p in periods if p is not None)
    # those after another batch are timed as interrupted periods (the calibrated policy reads
    # them: what prefills cost each state); the very first result has no period at all
    interrupted = [d[8] for d in recorded]
    assert [i for i, p in enumerate(interrupted) if p is not None] == sorted([60, 120, *switched])
    assert all(p > 0 for p in interrupted if p is not None)
    # at 64 it tried plain decoding and kept it; back at 1 it returned to speculation at the
    # first measurement, from what it had measured there before (no second exploration)
    toggles = [(size, state, reason) for _step, size, state, reason in run.toggles]
    assert toggles == [
        (1, "off", "explore"),
        (1, "on", "measured"),
        (64, "off", "explore"),
        (1, "on", "measured"),
    ]
    launched = run.report["launched_steps"]
    assert launched[-1] == 3 and 0 in launched[60:130]
    assert run.report["outputs_ok"]
    # each completed measurement is logged with both states' goodput in its bucket
    # (tokens per request-second, and the seconds of decoding since each was measured)
    measured = [
        dict(field.split("=", 1) for field in line.split()[2:])
        for line in run.hook_lines
        if " measured " in line
    ]
    assert {"1", "64"} <= {m["bucket"] for m in measured}
    at_64 = [m for m in measured if m["bucket"] == "64" and "-" not in (m["on"], m["off"])]
    assert at_64 and all(m["batch_size"] == "64" for m in at_64)
    # per request, plain decoding at 64 (1 token in 1.64 ms) beats speculation (~3 in 14.8 ms)
    on, off = (float(at_64[0][key].split("@")[0]) for key in ("on", "off"))
    assert off > on
    # the recorded periods make the decisions replayable
    spec_on = [True] + [on for _step, _rank, _size, on, *_ in recorded[:-1]]
    observations = [
        Observation(step, size, None if accept is None else (accept,), previous, period)
        for (step, _rank, size, _on, _changed, _reason, accept, period, *_), previous in zip(
            recorded, spec_on, strict=True
        )
    ]
    assert [d.spec_on for d in replay(MEASURE, observations)] == [d[3] for d in recorded]


def test_measurements_are_logged_at_info_only_when_asked(toy_release) -> None:
    run = run_fake_server(
        toy_release("zero_step_states", MEASURE),
        *("--phases", "1x60,64x60", "--good-draft", "--step-cost", STEP_COST),
    )
    assert [reason for *_, reason in run.toggles][:2] == ["explore", "measured"]
    assert not [line for line in run.hook_lines if " measured " in line]


def test_a_measuring_policy_does_not_time_steps_across_tensor_parallel_ranks(toy_release) -> None:
    run = run_fake_server(
        toy_release("zero_step_states", MEASURE),
        *("--phases", "1x30,64x30", "--good-draft", "--step-cost", STEP_COST, "--tp-size", "2"),
    )
    assert {d[7] for d in run.report["decisions"]} == {None}
    assert [reason for *_, reason in run.toggles] == ["high-load"]  # the load rule decides
    assert any("(here TP size 2, no carrier" in line for line in run.hook_lines)


@pytest.mark.parametrize("case", ["zero_step_states", "scheduler_mixins", "no_zero_step"])
def test_a_request_aborted_while_held_for_readmission_is_aborted(toy_release, case: str) -> None:
    """SGLang's normal loop: the switch's iteration has no prefill to run, so the retracted
    requests wait one iteration for re-admission, and an abort arrives then. The scheduler's
    own abort handler finds the held request (shown in its waiting queue) and answers it; the
    others are re-admitted and run as without the abort."""
    path = toy_release(case, BATCH_SIZE_POLICY)
    plain = run_fake_server(path, *LOAD_1_64_1, "--no-overlap")
    run = run_fake_server(path, *LOAD_1_64_1, "--no-overlap", "--abort-after-switch", "req-030")
    assert run.report["aborted"] == ["req-030"]
    assert plain.report["aborted"] == []
    assert_toggles(run, [(40, 64, "off", "high-load"), (80, 1, "on", "low-load")])
    assert run.report["launched_steps"] == plain.report["launched_steps"]
    # req-030's tokens after the switch are missing: its re-admission prefill's and 39 decodes'
    assert plain.report["tokens"] - run.report["tokens"] == 1 + 39
    assert (run.report["outputs_ok"], run.report["kv_held"]) == (True, [])
    assert "sgtrace-hook aborted 1 held requests (retracted at a switch)" in run.hook_lines


def test_the_calibrated_policy_logs_what_a_switch_cost_the_server(toy_release) -> None:
    """The calibrated policy (the default) measures a switch with requests running from the
    period that holds the retracted requests' prefill (switchcost.py), and the hook logs it
    with the measurements (``log_measurements``)."""
    calibrated = PolicyConfig(kind=PolicyKind.CALIBRATED)
    run = run_fake_server(
        toy_release("zero_step_states", calibrated, HookOptions(log_measurements=True)),
        *("--phases", "1x60,64x80", "--good-draft", "--step-cost", f"{STEP_COST},0.1"),
    )
    assert run.toggles, run.hook_lines[-10:]  # a switch with requests running: the probe at 1
    costs = [line for line in run.hook_lines if " a switch costs " in line]
    assert costs, run.hook_lines[-10:]
    fixed = [float(line.split(" a switch costs ")[1].split()[0]) for line in costs]
    # the probe at 1 request switched off: its re-prefill, a 100 ms extend batch on the toy's
    # GPU (long beside the host's few ms of jitter: at 50 ms it read 12% high once in 11 runs
    # on a busy 2-core machine), is 99 plain steps of 1.01 ms with the step in flight (host
    # time aside); one switch measured, the fit is its cost, none a request
    assert fixed[0] == pytest.approx(0.1 / 0.00101, rel=0.1), costs
    assert " + 0.0000 n plain steps" in costs[0], costs
    # why it switched: each switch is logged with what the policy compared there
    # (explain.py), and so is the end of each probe, with both states' predicted steps
    lines = [line.split("sgtrace-hook estimate ", 1)[1] for line in run.hook_lines if "sgtrace-hook estimate " in line]  # fmt: skip
    estimates = [dict(field.split("=", 1) for field in line.split()) for line in lines]
    logged = {(e["step"], e["batch_size"]) for e in estimates}
    assert {(str(step), str(size)) for step, size, _state, _reason in run.toggles} <= logged
    assert all(e["why"] in ("switch", "probe-ended", "held") for e in estimates), lines
    ended = [e for e in estimates if e["why"] == "probe-ended"]
    assert ended, lines
    compared = [e for e in ended if e["on"] != "-" and e["off"] != "-"]
    assert compared, lines
    for e in compared:  # predicted steps in ms with their error, the goodputs they imply
        on_ms = float(e["on"].split("ms")[0])
        assert 0.0 < on_ms and float(e["goodput_on"]) == pytest.approx(
            float(e["accept"]) / on_ms * 1e3, rel=0.01
        )
