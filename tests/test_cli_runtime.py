"""CLI tests of inject-hook, validate and report, on a toy release and on traces recorded live
on SGLang 0.5.16 (bench/results/live/, see its README)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from sgtrace.cli import main
from sgtrace.payload.config import HookOptions
from tests.hooks.hook_support import toy_tree

LIVE = Path(__file__).parent.parent / "bench" / "results" / "live"


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def live_traces(tmp_path: Path) -> Path:
    for archive in ("traces_hook_0.5.16.tgz", "traces_overhead_0.5.16.tgz"):
        with tarfile.open(LIVE / archive) as tar:
            tar.extractall(tmp_path, filter="data")
    return tmp_path / ".carry" / "hook-check"


def test_validate_passes_on_the_live_hook_trace(live_traces: Path) -> None:
    result = run("validate", str(live_traces / "hook_bs"), "--preset", "batch-size")
    assert (result.exit_code, result.output) == (
        0,
        "OK: 1908 steps on rank 0 (1910 decisions) hold the on/off rules, agree across ranks "
        "and follow the policy.\n",
    )


def test_validate_fails_on_the_live_broken_hook_trace(live_traces: Path) -> None:
    result = run("validate", str(live_traces / "hook_broken"), "--preset", "batch-size")
    lines = result.output.splitlines()
    assert result.exit_code == 1
    assert lines[0] == "FAILED: 2664 violations in 1318 steps on rank 0 (1320 decisions):"
    assert lines[1] == (
        "  step 292, rank 0 [off-step]: expected no draft with num_steps > 1, no draft_forward "
        "with num_steps > 1; seen EagleDraftWorker.draft(batch_size=24, num_steps=3, topk=1)"
    )


def test_validate_a_policy_the_trace_did_not_follow_fails(live_traces: Path) -> None:
    result = run(
        "validate",
        str(live_traces / "hook_bs"),
        "--preset",
        "batch-size",
        "--policy",
        str(write_policy(live_traces.parent, "off_above = 32\n")),
    )
    assert result.exit_code == 1
    assert "[follows-policy]" in result.output.splitlines()[1]


def write_policy(folder: Path, text: str) -> Path:
    path = folder / "policy.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_validate_an_unreadable_trace_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "nothing")])
    assert result.exit_code == 2


def test_report_draws_the_live_trace(live_traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.svg"
    result = run("report", str(live_traces / "hook_bs"), "-o", str(out))
    assert result.exit_code == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<?xml") and "Speculation (decision of the hook)" in text


def test_inject_hook_runtime_is_idempotent(tmp_path: Path) -> None:
    tree = toy_tree("zero_step_states", tmp_path / "toy")
    out = tmp_path / "hook"
    first = run(
        "inject-hook",
        "--source",
        str(tree.root),
        "-o",
        str(out),
        "--preset",
        "batch-size",
        "--no-cache",
    )
    second = run(
        "inject-hook",
        "--source",
        str(tree.root),
        "-o",
        str(out),
        "--preset",
        "batch-size",
        "--no-cache",
    )
    assert first.exit_code == second.exit_code == 0
    assert f"{out}: wrote sgtrace_boot.json, sgtrace_hook.json" in first.output
    assert f"{out}: unchanged" in second.output


def test_inject_hook_patch_diff_write_revert(tmp_path: Path) -> None:
    tree = toy_tree("zero_step_states", tmp_path / "toy")
    before = {p: p.read_bytes() for p in tree.root.rglob("*.py")}
    args = ["inject-hook", "--source", str(tree.root), "--mode", "patch", "--no-cache"]
    planned = run(*args)
    assert planned.exit_code == 0 and "+" in planned.output and "# sgtrace-hook" in planned.output
    assert {p: p.read_bytes() for p in tree.root.rglob("*.py")} == before  # diff only
    assert run(*args, "--write").exit_code == 0
    again = run(*args, "--write")
    assert "already patched; nothing changed" in again.output
    assert run(*args, "--revert").exit_code == 0
    assert {p: p.read_bytes() for p in tree.root.rglob("*.py")} == before


def test_inject_hook_bad_policy_value_is_a_clear_error(tmp_path: Path) -> None:
    tree = toy_tree("zero_step_states", tmp_path / "toy")
    result = CliRunner().invoke(
        main,
        [
            "inject-hook",
            "--source",
            str(tree.root),
            "-o",
            str(tmp_path / "h"),
            "--off-above",
            "2",
            "--no-cache",
        ],
    )
    assert result.exit_code == 2
    assert "off_above" in result.output and "expected" in result.output


def test_inject_hook_writes_each_behaviour_switch_into_the_config(tmp_path: Path) -> None:
    tree = toy_tree("zero_step_states", tmp_path / "toy")
    out = tmp_path / "hook"
    args = ("inject-hook", "--source", str(tree.root), "-o", str(out), "--no-cache")
    result = run(*args, "--log-measurements", "--catch-up")
    assert result.exit_code == 0, result.output
    config = json.loads((out / "sgtrace_hook.json").read_text())
    assert config["options"] == {"log_measurements": True, "catch_up": True, "off_state": "plain"}
    default = run(*args)
    assert default.exit_code == 0, default.output
    config = json.loads((out / "sgtrace_hook.json").read_text())
    assert config["options"] == HookOptions().to_dict()
    assert (
        "  does: switches: off runs SGLang's plain decode path (the target's DECODE CUDA "
        "graphs, no draft); a switch re-admits the running requests before "
        "sglang.srt.managers.scheduler:Scheduler.get_new_batch_prefill\n"
    ) in default.output


@pytest.mark.parametrize("flag", ["--off-state", "--off-kernel", "--off-step"])
def test_the_zero_step_off_states_flags_are_gone(tmp_path: Path, flag: str) -> None:
    tree = toy_tree("zero_step_states", tmp_path / "toy")
    out = tmp_path / "hook"
    result = run("inject-hook", "--source", str(tree.root), "-o", str(out), flag, "upstream")
    assert result.exit_code == 2 and not out.exists()
    assert f"Error: No such option '{flag}'" in result.output


def test_a_release_lacking_a_plain_off_state_name_gets_no_hook(tmp_path: Path) -> None:
    """Every release 0.5.9-0.5.23 has the names the plain off state uses; a tree without one
    (here the function that gives a request's KV back) gets no hook: inject-hook says which
    it lacks, in either mode, and writes nothing."""
    tree = toy_tree("zero_step_states", tmp_path / "toy")
    (tree.root / "sglang/srt/mem_cache/common.py").unlink()
    before = {p: p.read_bytes() for p in tree.root.rglob("*.py")}
    out = tmp_path / "hook"
    result = run("inject-hook", "--source", str(tree.root), "-o", str(out), "--no-cache")
    assert result.exit_code != 0 and not out.exists()
    assert "the hook's off state (SGLang's plain decode path) is not mapped" in result.output
    assert "release_kv: release_kv_cache (a binding of sglang.srt.mem_cache.common)" in (
        result.output
    )
    patched = run("inject-hook", "--source", str(tree.root), "--mode", "patch", "--write")
    assert patched.exit_code != 0 and "is not mapped on this release" in patched.output
    assert {p: p.read_bytes() for p in tree.root.rglob("*.py")} == before


def test_validate_passes_on_the_payload_s_live_traces(tmp_path: Path) -> None:
    """Recorded with the payload package (bench/results/live/payload_0.5.16/final). In the
    default hook's trace, decode results of steps 542 (off) and 543 (the probe: on) were
    processed before one launch (an idle gap under the overlap scheduler): the later one
    governs that launch, which ran speculating; before, validate called it a violation. The
    default then was the threshold policy (preset ``threshold`` now)."""
    with tarfile.open(LIVE / "payload_0.5.16" / "final" / "traces.tgz") as tar:
        tar.extractall(tmp_path, filter="data")
    hooks = tmp_path / ".carry" / "hook-check"
    verdicts = [
        run("validate", str(hooks / name), "--preset", preset).output
        for name, preset in (("hook_bs", "batch-size"), ("hook_default", "threshold"))
    ]
    assert verdicts == [
        "OK: 1887 steps on rank 0 (1889 decisions) hold the on/off rules, agree across ranks "
        "and follow the policy.\n",
        "OK: 1374 steps on rank 0 (1376 decisions) hold the on/off rules, agree across ranks "
        "and follow the policy.\n",
    ]
