"""Writing the hook: the runtime directory, the patch with backup, idempotence, exact revert."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hook_support import BATCH_SIZE_POLICY, toy_spec, toy_tree

from sgtrace.bootstrap import BootPlugin, payload_files, render_boot_files
from sgtrace.errors import SgtraceError
from sgtrace.hooks.apply import (
    AlreadyPresent,
    Applied,
    PatchStatus,
    generate_runtime_hook,
    patch_source,
)
from sgtrace.hooks.render import PATCH_SHIM
from sgtrace.payload.config import HookOptions, OffStep
from sgtrace.payload.policy import PolicyConfig
from sgtrace.payload.registry import PluginKind

SGLANG_FILES = ("sglang/srt/managers/scheduler.py", "sglang/srt/speculative/eagle_worker_v2.py")
PAYLOAD_FILES = tuple(sorted(payload_files()))  # sgtrace_payload/*.py
HOOK_FILES = (
    "sglang/sgtrace_hook.json",
    "sglang/sgtrace_hook.py",
    *(f"sglang/{name}" for name in PAYLOAD_FILES),
)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` and its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_patch_prints_a_diff_and_writes_nothing_by_default(tmp_path: Path) -> None:
    tree = toy_tree("zero_step_states", tmp_path)
    before = snapshot(tmp_path)
    result = patch_source(tree, BATCH_SIZE_POLICY, spec=toy_spec(tree))
    assert result.status is PatchStatus.PLANNED
    assert result.files == (*SGLANG_FILES, *HOOK_FILES)
    assert (
        "+            _sgtrace_hook.on_decode_result(batch, result)  # sgtrace-hook\n"
        in result.diff
    )
    assert snapshot(tmp_path) == before


def test_write_then_rerun_then_revert_restores_every_byte(tmp_path: Path) -> None:
    tree = toy_tree("zero_step_states", tmp_path)
    spec = toy_spec(tree)
    before = snapshot(tmp_path)

    applied = patch_source(tree, BATCH_SIZE_POLICY, write=True, spec=spec)
    assert applied.status is PatchStatus.APPLIED
    patched = snapshot(tmp_path)
    assert sorted(set(patched) - set(before)) == sorted(
        [*HOOK_FILES, "sglang/sgtrace_hook_patch.json"]
        + [f + ".sgtrace-orig" for f in SGLANG_FILES]
    )
    for name in SGLANG_FILES:
        assert patched[name + ".sgtrace-orig"] == before[name]
        compile(patched[name], name, "exec")
    assert patched["sglang/sgtrace_hook.py"].decode() == PATCH_SHIM
    for name, text in payload_files().items():
        assert patched[f"sglang/{name}"].decode() == text
    config = json.loads(patched["sglang/sgtrace_hook.json"])
    assert (config["delivery"], config["options"]) == ("patch", HookOptions().to_dict())
    assert config["policy"] == BATCH_SIZE_POLICY.to_dict()

    again = patch_source(tree, BATCH_SIZE_POLICY, write=True)
    assert (again.status, again.diff) == (PatchStatus.ALREADY_PRESENT, "")
    assert snapshot(tmp_path) == patched

    reverted = patch_source(tree, BATCH_SIZE_POLICY, revert=True)
    assert reverted.status is PatchStatus.REVERTED
    assert (
        "-            _sgtrace_hook.on_decode_result(batch, result)  # sgtrace-hook\n"
        in reverted.diff
    )
    assert snapshot(tmp_path) == before
    assert not (tmp_path / "sglang" / "sgtrace_payload").exists()  # the package folder too
    assert patch_source(tree, BATCH_SIZE_POLICY, revert=True).status is PatchStatus.NOT_PATCHED


def test_revert_refuses_a_file_edited_after_patching(tmp_path: Path) -> None:
    tree = toy_tree("zero_step_states", tmp_path)
    patch_source(tree, BATCH_SIZE_POLICY, write=True, spec=toy_spec(tree))
    edited = tmp_path / SGLANG_FILES[0]
    edited.write_text(edited.read_text() + "# local change\n")
    with pytest.raises(SgtraceError) as caught:
        patch_source(tree, BATCH_SIZE_POLICY, revert=True)
    assert str(caught.value) == (
        f"cannot revert {edited}: it changed after the patch was applied; compare it with "
        f"{edited}.sgtrace-orig and restore by hand"
    )


def test_new_policy_on_a_patched_tree_rewrites_only_the_config(tmp_path: Path) -> None:
    tree = toy_tree("zero_step_states", tmp_path)
    spec = toy_spec(tree)
    patch_source(tree, BATCH_SIZE_POLICY, write=True, spec=spec)
    result = patch_source(tree, PolicyConfig(), write=True, spec=spec)
    assert (result.status, result.files) == (PatchStatus.APPLIED, ("sglang/sgtrace_hook.json",))
    patch_source(tree, PolicyConfig(), revert=True)
    assert not (tmp_path / "sglang/sgtrace_hook.json").exists()


def test_runtime_directory_is_written_once_and_keeps_other_plugins(tmp_path: Path) -> None:
    tree = toy_tree("zero_step_states", tmp_path / "src")
    spec = toy_spec(tree)
    out = tmp_path / "hook"
    out.mkdir()
    tracer = BootPlugin(PluginKind.TRACER, "sgtrace_tracer.json", "{}")
    for name, text in render_boot_files([tracer]).items():
        (out / name).parent.mkdir(exist_ok=True)
        (out / name).write_text(text)

    options = HookOptions(off_step=OffStep.UPSTREAM)
    first = generate_runtime_hook(tree, out, BATCH_SIZE_POLICY, spec, options)
    assert isinstance(first, Applied)
    assert first.files == ("sgtrace_boot.json", "sgtrace_hook.json")
    manifest = json.loads((out / "sgtrace_boot.json").read_text())
    assert manifest["plugins"] == [
        {"config": "sgtrace_hook.json", "kind": "hook"},
        {"config": "sgtrace_tracer.json", "kind": "tracer"},
    ]
    config = json.loads((out / "sgtrace_hook.json").read_text())
    assert (config["delivery"], config["options"]["off_step"]) == ("runtime", "upstream")
    assert config["patch"] == {
        "attach": {
            "module": "sglang.srt.speculative.eagle_worker_v2",
            "qualname": "EAGLEWorkerV2.__init__",
        },
        "decide": {
            "module": "sglang.srt.managers.scheduler_components.batch_result_processor",
            "qualname": "SchedulerBatchResultProcessor.process_batch_result_decode",
        },
    }
    assert config["can_switch"] is True

    second = generate_runtime_hook(tree, out, BATCH_SIZE_POLICY, spec, options)
    assert isinstance(second, AlreadyPresent)
