"""Writing the hook: the runtime directory, the patch with backup, idempotence, exact revert."""

from __future__ import annotations

import json
from dataclasses import replace
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
from sgtrace.hooks.patch_record import (
    CreatedEntry,
    ModifiedEntry,
    PatchRecord,
    WritePlan,
    plan_revert,
    plan_write,
    sha256,
)
from sgtrace.hooks.render import PATCH_SHIM
from sgtrace.payload.config import HookOptions
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

    reverted = patch_source(tree, BATCH_SIZE_POLICY, revert=True, show_diff=True)
    assert reverted.status is PatchStatus.REVERTED
    assert (
        "-            _sgtrace_hook.on_decode_result(batch, result)  # sgtrace-hook\n"
        in reverted.diff
    )
    assert snapshot(tmp_path) == before
    assert not (tmp_path / "sglang" / "sgtrace_payload").exists()  # the package folder too
    assert patch_source(tree, BATCH_SIZE_POLICY, revert=True).status is PatchStatus.NOT_PATCHED


def test_revert_prints_a_summary_not_the_diff_by_default(tmp_path: Path) -> None:
    tree = toy_tree("zero_step_states", tmp_path)
    before = snapshot(tmp_path)
    patch_source(tree, BATCH_SIZE_POLICY, write=True, spec=toy_spec(tree))
    created = {name: len(snapshot(tmp_path)[name]) for name in HOOK_FILES}
    reverted = patch_source(tree, BATCH_SIZE_POLICY, revert=True)
    assert reverted.diff == ""
    restored = sum(len(before[name]) for name in SGLANG_FILES)
    assert reverted.summary().splitlines() == [
        *(
            f"  {name}: restored from its backup ({len(before[name]):,} bytes)"
            for name in SGLANG_FILES
        ),
        *(f"  {name}: deleted ({size:,} bytes)" for name, size in created.items()),
        f"2 files restored ({restored:,} bytes), {len(created)} files deleted",
    ]
    assert snapshot(tmp_path) == before


def test_revert_refuses_a_file_edited_after_patching(tmp_path: Path) -> None:
    tree = toy_tree("zero_step_states", tmp_path)
    patch_source(tree, BATCH_SIZE_POLICY, write=True, spec=toy_spec(tree))
    edited = tmp_path / SGLANG_FILES[0]
    edited.write_text(edited.read_text() + "# local change\n")
    kept = snapshot(tmp_path)
    with pytest.raises(SgtraceError) as caught:
        patch_source(tree, BATCH_SIZE_POLICY, revert=True)
    assert str(caught.value) == (
        f"cannot revert the sgtrace patch in {tmp_path}; nothing was changed:\n"
        f"  {SGLANG_FILES[0]}: neither the file the patch wrote nor its original (SGLang "
        "upgraded or the file edited after the patch?)\n"
        "Reinstall SGLang's files (pip install --force-reinstall --no-deps sglang==VERSION), "
        f"then delete {tmp_path}/sglang/sgtrace_hook_patch.json and the *.sgtrace-orig files; "
        "or compare each file with its backup and restore by hand"
    )
    assert snapshot(tmp_path) == kept


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

    options = HookOptions(log_measurements=True)
    first = generate_runtime_hook(tree, out, BATCH_SIZE_POLICY, spec, options)
    assert isinstance(first, Applied)
    assert first.files == ("sgtrace_boot.json", "sgtrace_hook.json")
    manifest = json.loads((out / "sgtrace_boot.json").read_text())
    assert manifest["plugins"] == [
        {"config": "sgtrace_hook.json", "kind": "hook"},
        {"config": "sgtrace_tracer.json", "kind": "tracer"},
    ]
    config = json.loads((out / "sgtrace_hook.json").read_text())
    assert (config["delivery"], config["options"]) == ("runtime", options.to_dict())
    assert options.to_dict() == {"log_measurements": True, "catch_up": False, "off_state": "plain"}
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
    assert config["plain_off_names"] == spec.plain_names.to_dict()  # what off switches with

    second = generate_runtime_hook(tree, out, BATCH_SIZE_POLICY, spec, options)
    assert isinstance(second, AlreadyPresent)


HOOKED = b"import x\nfrom sglang import sgtrace_hook as _sgtrace_hook  # sgtrace-hook\n"


def test_a_recorded_file_the_patch_no_longer_edits_is_dropped_once_replaced() -> None:
    """A site that moved to another file between releases: the old file, replaced by the
    upgrade, leaves the record and its backup (of the old release) is deleted."""
    entry = ModifiedEntry("p/a.py", "p/a.py.sgtrace-orig", sha256(b"import x\n"), sha256(HOOKED))
    record = PatchRecord((entry,), ())
    contents = {"p/a.py": b"import y\n", "p/a.py.sgtrace-orig": b"import x\n"}
    plan = plan_write(record, {}, {"p/h.py": b"h"}, contents, ".sgtrace-orig")
    assert plan == WritePlan(
        record=PatchRecord((), (CreatedEntry("p/h.py", (sha256(b"h"),)),)), dropped=("p/a.py",)
    )
    kept = plan_write(record, {}, {}, {**contents, "p/a.py": HOOKED}, ".sgtrace-orig")
    assert (kept.record.modified, kept.dropped, kept.refusals) == ((entry,), (), ())
    orphan = plan_write(record, {}, {}, {"p/a.py": HOOKED}, ".sgtrace-orig")
    assert orphan.refusals == ("p/a.py: carries the hook but its backup is missing or wrong",)


def test_a_version_1_backup_is_proven_by_the_patched_file_less_the_hook_lines() -> None:
    entry = ModifiedEntry("p/a.py", "p/a.py.sgtrace-orig", None, sha256(HOOKED))
    record = PatchRecord((entry,), (CreatedEntry("p/h.py"),), version=1)
    good = plan_revert(record, {"p/a.py": HOOKED, "p/a.py.sgtrace-orig": b"import x\n"})
    assert (good.restores, good.deletes, good.refusals) == (("p/a.py",), (), ())
    assert good.record.modified == (replace(entry, original_sha256=sha256(b"import x\n")),)
    bad = plan_revert(record, {"p/a.py": HOOKED, "p/a.py.sgtrace-orig": b"import z\n"})
    assert bad.refusals == (
        "p/a.py: its backup p/a.py.sgtrace-orig is not the original this patch replaced "
        "(another release's file?)",
    )


def test_a_record_naming_a_path_outside_the_tree_is_refused() -> None:
    text = json.dumps({"version": 2, "created": {"../../etc/x": []}, "modified": {}})
    with pytest.raises(ValueError) as caught:
        PatchRecord.from_json(text, "R")
    assert str(caught.value) == (
        "R is not an sgtrace patch record (path '../../etc/x' leaves the source tree); nothing "
        "was changed. Restore SGLang's files by reinstalling it "
        "(pip install --force-reinstall --no-deps sglang==VERSION)"
    )
