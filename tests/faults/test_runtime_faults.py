"""Faults of the runtime side (issue 23): patch, upgrade, rewrite, revert; kills at each step.

Each test was written to fail on the code before the fix; its docstring says how it failed.
Release trees are real SGLang releases (cached downloads) copied to a temporary folder.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from sgtrace.bootstrap import payload_files
from sgtrace.cli import main
from sgtrace.errors import SgtraceError
from sgtrace.graphs.source import SourceTree
from sgtrace.hooks.apply import patch_source
from sgtrace.hooks.inject import MARKER
from sgtrace.hooks.patch_record import MARKER as RECORD_MARKER
from sgtrace.hooks.patch_record import PatchStatus
from sgtrace.hooks.sites import locate_sites
from sgtrace.hooks.spec import HookSpec
from sgtrace.payload.policy import PolicyConfig
from tests.faults.runtime_support import (
    POLICY,
    Killed,
    StoppingOps,
    differences,
    pip_upgrade,
    release_copy,
    snapshot,
    start_paused,
    temp_files,
)

OLD, NEW = "0.5.9", "0.5.16"
EDITED = ("sglang/srt/managers/scheduler.py", "sglang/srt/speculative/eagle_worker_v2.py")
# the patch creates the payload package, the hook's config and the module the source imports
CREATED = len(payload_files()) + 2
# 2 backups, the record, 2 patched and the created files: a temp file and a rename each
WRITE_STEPS = 2 * (2 + 1 + 2 + CREATED)
REVERT_STEPS = 2 + CREATED + 1  # 2 renames of backups, the created files and the record deleted


@pytest.fixture(scope="module")
def specs(sglang_source: Callable[[str], SourceTree]) -> dict[str, HookSpec]:
    return {v: locate_sites(sglang_source(v)) for v in (OLD, NEW)}


@pytest.fixture
def installed(tmp_path: Path, sglang_source: Callable[[str], SourceTree]) -> SourceTree:
    """SGLang 0.5.9 "installed" in a temporary site folder."""
    return release_copy(sglang_source(OLD), tmp_path / "site")


def test_the_record_marker_is_the_codemods() -> None:
    assert RECORD_MARKER == MARKER


@pytest.mark.network
def test_rewrite_after_an_in_place_upgrade_backs_up_the_new_originals(
    installed: SourceTree,
    specs: dict[str, HookSpec],
    sglang_source: Callable[[str], SourceTree],
    tmp_path: Path,
) -> None:
    """Before: the second write kept 0.5.9's backups, and the revert put them over 0.5.16."""
    patch_source(installed, POLICY, write=True, spec=specs[OLD])
    pip_upgrade(sglang_source(OLD), sglang_source(NEW), installed.root)
    rewrite = patch_source(installed, POLICY, write=True, spec=specs[NEW])
    new = release_copy(sglang_source(NEW), tmp_path / "pristine")
    sizes = {name: len((new.root / name).read_bytes()) for name in EDITED}
    assert [str(a) for a in rewrite.actions[:2]] == [
        f"{name}.sgtrace-orig: backed up anew (the file changed since the last write: SGLang "
        f"upgraded?) ({sizes[name]:,} bytes)"
        for name in EDITED
    ]
    reverted = patch_source(installed, POLICY, revert=True)
    assert reverted.summary().splitlines()[:2] == [
        f"  {name}: restored from its backup ({sizes[name]:,} bytes)" for name in EDITED
    ]
    assert differences(snapshot(installed.root), snapshot(new.root)) == []


@pytest.mark.network
def test_revert_after_an_in_place_upgrade_refuses_and_keeps_everything(
    installed: SourceTree, specs: dict[str, HookSpec], sglang_source: Callable[[str], SourceTree]
) -> None:
    """Before: the revert restored 0.5.9's scheduler.py and eagle_worker_v2.py over 0.5.16's."""
    patch_source(installed, POLICY, write=True, spec=specs[OLD])
    pip_upgrade(sglang_source(OLD), sglang_source(NEW), installed.root)
    kept = snapshot(installed.root)
    with pytest.raises(SgtraceError) as caught:
        patch_source(installed, POLICY, revert=True)
    root = installed.root
    reason = "neither the file the patch wrote nor its original (SGLang upgraded or the file "
    assert str(caught.value) == (
        f"cannot revert the sgtrace patch in {root}; nothing was changed:\n"
        + "".join(f"  {name}: {reason}edited after the patch?)\n" for name in EDITED)
        + "Reinstall SGLang's files (pip install --force-reinstall --no-deps sglang==VERSION), "
        f"then delete {root}/sglang/sgtrace_hook_patch.json and the *.sgtrace-orig files; or "
        "compare each file with its backup and restore by hand"
    )
    assert differences(snapshot(root), kept) == []


@pytest.mark.network
def test_a_write_stopped_at_any_step_is_finished_or_undone_by_a_rerun(
    installed: SourceTree, specs: dict[str, HookSpec]
) -> None:
    """Before: a stop left temporary files behind; every step is tried, then both reruns."""
    pristine = snapshot(installed.root)
    full = StoppingOps(10**6)
    patch_source(installed, POLICY, write=True, spec=specs[OLD], ops=full)
    patched = snapshot(installed.root)
    assert full.calls == WRITE_STEPS
    patch_source(installed, POLICY, revert=True)
    for stop in range(1, WRITE_STEPS + 1):
        for rerun in ("write", "revert"):
            with pytest.raises(Killed):
                patch_source(installed, POLICY, write=True, spec=specs[OLD], ops=StoppingOps(stop))
            if rerun == "write":
                patch_source(installed, POLICY, write=True, spec=specs[OLD])
                assert (stop, differences(snapshot(installed.root), patched)) == (stop, [])
                patch_source(installed, POLICY, revert=True)
            else:
                patch_source(installed, POLICY, revert=True)
            assert (stop, rerun, differences(snapshot(installed.root), pristine)) == (
                stop,
                rerun,
                [],
            )


@pytest.mark.network
def test_a_revert_stopped_at_any_step_is_finished_by_a_rerun(
    installed: SourceTree, specs: dict[str, HookSpec]
) -> None:
    """Before: a revert stopped after its first rename failed again with FileNotFoundError on
    ``.sgtrace-orig``, the tree half reverted."""
    pristine = snapshot(installed.root)
    for stop in range(1, REVERT_STEPS + 1):
        patch_source(installed, POLICY, write=True, spec=specs[OLD])
        with pytest.raises(Killed):
            patch_source(installed, POLICY, revert=True, ops=StoppingOps(stop))
        result = patch_source(installed, POLICY, revert=True)
        assert (stop, result.status) == (stop, PatchStatus.REVERTED)
        assert (stop, differences(snapshot(installed.root), pristine)) == (stop, [])


@pytest.mark.network
@pytest.mark.parametrize(
    ("action", "stop", "left"),
    [
        ("write", 8, ["sglang/srt/managers/.scheduler.py"]),
        ("write", 12, ["sglang/.sgtrace_hook.json"]),
        ("revert", 2, []),
    ],
)
def test_a_real_sigkill_mid_run_is_recovered_by_a_rerun(
    installed: SourceTree, action: str, stop: int, left: list[str]
) -> None:
    """A child process writing or reverting is SIGKILLed at an operation; rerunning recovers.

    Write step 8 renames the temporary patched scheduler.py, step 12 the temporary hook config
    (both left behind by the kill); revert step 2 renames the second backup (the first is done).
    """
    # the child locates the sites in its tree, as the parent does here: the same hook config
    pristine = snapshot(installed.root)
    patch_source(installed, POLICY, write=True)
    patched = snapshot(installed.root)
    if action == "write":
        patch_source(installed, POLICY, revert=True)
    child = start_paused(action, installed.root, stop)
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.startswith(f"stopped at {stop}: "), (
        line,
        child.stderr.read() if child.stderr else "",
    )
    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL
    assert snapshot(installed.root) not in (pristine, patched)
    assert [name.split(".sgtrace-tmp.")[0] for name in temp_files(installed.root)] == left
    patch_source(installed, POLICY, write=action == "write", revert=action == "revert")
    assert temp_files(installed.root) == []
    expected = patched if action == "write" else pristine
    assert differences(snapshot(installed.root), expected) == []


@pytest.mark.network
def test_writing_into_the_download_cache_is_refused(
    sglang_source: Callable[[str], SourceTree], tmp_path: Path
) -> None:
    """Before: --write --source sglang==X patched the shared cache, which later runs read."""
    cache = tmp_path / "cache"
    release_copy(sglang_source(OLD), cache / "sources" / f"sglang-{OLD}")
    (cache / "sources" / f"sglang-{OLD}" / ".complete").write_text(f"sglang=={OLD}\n")
    before = snapshot(cache)
    args = ["inject-hook", "--mode", "patch", "--write", "--source", f"sglang=={OLD}"]
    result = CliRunner().invoke(main, [*args, "--cache-dir", str(cache)])
    root = cache / "sources" / f"sglang-{OLD}"
    assert (result.exit_code, result.output) == (
        2,
        f"Error: refusing to patch {root}: it is sgtrace's shared download cache of "
        f"sglang=={OLD}, read by every later --source sglang=={OLD} run, not an SGLang that "
        "runs. Patch the installed sglang (leave out --source) or a copy of the release: "
        f"cp -r {root} /tmp/sglang-src, then --source /tmp/sglang-src\n",
    )
    assert differences(snapshot(cache), before) == []


@pytest.mark.network
def test_revert_prints_a_summary_and_the_diff_only_on_request(installed: SourceTree) -> None:
    """Before: --revert printed the whole 1,600-line diff."""
    source = ["inject-hook", "--mode", "patch", "--source", str(installed.root)]
    pristine = snapshot(installed.root)
    runner = CliRunner()
    assert runner.invoke(main, [*source, "--write"]).exit_code == 0
    created = {
        name: len(data)
        for name, (data, _mode) in snapshot(installed.root).items()
        if name.startswith(("sglang/sgtrace_hook", "sglang/sgtrace_payload/"))
        and not name.endswith("_patch.json")
    }
    reverted = runner.invoke(main, [*source, "--revert"])
    sizes = {name: len(pristine[name][0]) for name in EDITED}
    assert reverted.exit_code == 0, reverted.stderr
    assert reverted.stdout.splitlines() == [
        *(f"  {name}: restored from its backup ({size:,} bytes)" for name, size in sizes.items()),
        *(f"  {name}: deleted ({size:,} bytes)" for name, size in sorted(created.items())),
        f"2 files restored ({sum(sizes.values()):,} bytes), {CREATED} files deleted",
    ]
    assert runner.invoke(main, [*source, "--write"]).exit_code == 0
    with_diff = runner.invoke(main, [*source, "--revert", "--diff"])
    assert with_diff.stdout.startswith(f"--- a/{EDITED[0]}\n+++ b/{EDITED[0]}\n")
    assert len(with_diff.stdout.splitlines()) > 1000
    assert differences(snapshot(installed.root), pristine) == []


def as_version_1(record_path: Path) -> None:
    """Rewrite a patch record as sgtrace wrote it before backups were bound to content."""
    record = json.loads(record_path.read_text())
    old = {
        "modified": {
            path: {"backup": entry["backup"], "sha256": entry["patched_sha256"]}
            for path, entry in record["modified"].items()
        },
        "created": sorted(record["created"]),
    }
    record_path.write_text(json.dumps(old, indent=2, sort_keys=True) + "\n")


@pytest.mark.network
def test_a_tree_patched_by_the_older_sgtrace_reverts_when_its_backups_prove_right(
    installed: SourceTree, specs: dict[str, HookSpec], sglang_source: Callable[[str], SourceTree]
) -> None:
    """A version 1 record has no hash of the original: its backup must equal the patched file
    less the hook's lines. The older write's upgrade bug (0.5.9 backups, 0.5.16 patched files
    recorded) is then refused."""
    record = installed.root / "sglang/sgtrace_hook_patch.json"
    pristine = snapshot(installed.root)
    patch_source(installed, POLICY, write=True, spec=specs[OLD])
    as_version_1(record)
    assert patch_source(installed, POLICY, revert=True).status is PatchStatus.REVERTED
    assert differences(snapshot(installed.root), pristine) == []

    patch_source(installed, POLICY, write=True, spec=specs[OLD])
    old_backups = {name: (installed.root / f"{name}.sgtrace-orig").read_bytes() for name in EDITED}
    pip_upgrade(sglang_source(OLD), sglang_source(NEW), installed.root)
    patch_source(installed, POLICY, write=True, spec=specs[NEW])
    for name, data in old_backups.items():  # what the older sgtrace left: 0.5.9's backups
        (installed.root / f"{name}.sgtrace-orig").write_bytes(data)
    as_version_1(record)
    kept = snapshot(installed.root)
    with pytest.raises(SgtraceError) as caught:
        patch_source(installed, POLICY, revert=True)
    assert str(caught.value).splitlines()[1:3] == [
        f"  {name}: its backup {name}.sgtrace-orig is not the original this patch replaced "
        "(another release's file?)"
        for name in EDITED
    ]
    assert differences(snapshot(installed.root), kept) == []


@pytest.mark.network
def test_a_damaged_patch_record_is_refused_and_nothing_is_touched(
    installed: SourceTree, specs: dict[str, HookSpec]
) -> None:
    """Before: a ``json.JSONDecodeError`` traceback."""
    patch_source(installed, POLICY, write=True, spec=specs[OLD])
    record = installed.root / "sglang/sgtrace_hook_patch.json"
    record.write_bytes(record.read_bytes()[:100])
    kept = snapshot(installed.root)
    for policy in (POLICY, PolicyConfig()):  # a revert, and a write of another config
        with pytest.raises(SgtraceError) as caught:
            patch_source(
                installed, policy, write=policy != POLICY, revert=policy == POLICY,
                spec=specs[OLD],
            )  # fmt: skip
        assert str(caught.value) == (
            f"{record} is not an sgtrace patch record (Unterminated string starting at: line 4 "
            "column 7 (char 57)); nothing was changed. Restore SGLang's files by reinstalling it "
            "(pip install --force-reinstall --no-deps sglang==VERSION)"
        )
    assert differences(snapshot(installed.root), kept) == []
