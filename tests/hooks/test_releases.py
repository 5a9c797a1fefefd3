"""The hook on every SGLang release from 0.5.9 to 0.5.23: sites, names, patch, revert.

Downloads each release once (``sglang_source`` fixture of tests/conftest.py, cached). Every
release switches, through the scheduler's plain decode path; the names the plain off state
uses are checked on every release by tests/sglang/test_map_releases.py.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.sglang.releases import RELEASES, defined_in_source

from sgtrace.graphs.build import Project
from sgtrace.graphs.source import SourceTree
from sgtrace.hooks.apply import PatchStatus, generate_runtime_hook, patch_source
from sgtrace.hooks.sites import locate_sites
from sgtrace.names import QualName
from sgtrace.payload.config import NAMES_KEY, PLAIN_NAMES_KEY, HookOptions
from sgtrace.payload.policy import PolicyConfig
from sgtrace.sglang.family import family_of_release
from sgtrace.sglang.plain_names import plain_off_names_in
from sgtrace.sglang.release_names import runtime_names_in

pytestmark = [pytest.mark.releases, pytest.mark.network]


@pytest.mark.parametrize("version", RELEASES)
def test_release_sites_names_patch_and_revert(
    version: str,
    sglang_source: Callable[[str], SourceTree],
    sglang_project: Callable[[str], Project],
    tmp_path: Path,
) -> None:
    tree = sglang_source(version)
    spec = locate_sites(tree, sglang_project(version))
    assert spec.family is family_of_release(version), spec.summary()
    missing = [str(n) for n in spec.required if not defined_in_source(tree.root, n)]
    assert missing == [], f"{version}: the hook relies on names the source lacks: {missing}"
    plain = spec.plain_names
    assert spec.switch.target == QualName(plain.switch_module, plain.switch_qualname)
    assert defined_in_source(tree.root, spec.switch.target), spec.summary()
    assert spec.does().startswith("switches: off runs SGLang's plain decode path"), version

    copy = tmp_path / "src"
    files = sorted({spec.decide.file, spec.attach.file})
    for rel in files:
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(tree.root / rel, copy / rel)
    originals = {rel: (copy / rel).read_bytes() for rel in files}
    copy_tree = SourceTree(copy, ("sglang",), f"copy of {tree.label}")
    policy = PolicyConfig()

    applied = patch_source(copy_tree, policy, write=True, spec=spec, options=HookOptions())
    assert applied.status is PatchStatus.APPLIED
    for rel in files:
        compile((copy / rel).read_bytes(), rel, "exec")
    again = patch_source(copy_tree, policy, write=True, spec=spec, options=HookOptions())
    assert again.status is PatchStatus.ALREADY_PRESENT
    assert patch_source(copy_tree, policy, revert=True).status is PatchStatus.REVERTED
    assert {rel: (copy / rel).read_bytes() for rel in files} == originals
    on_disk = sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file())
    assert on_disk == files

    generate_runtime_hook(tree, tmp_path / "hook", policy, spec)
    config = json.loads((tmp_path / "hook" / "sgtrace_hook.json").read_text())
    patched = [QualName(t["module"], t["qualname"]) for t in config["patch"].values()]
    assert all(name in spec.required for name in patched)
    assert config[NAMES_KEY] == runtime_names_in(tree.root).to_dict()  # the release's own
    assert config[PLAIN_NAMES_KEY] == plain_off_names_in(tree.root)[0].to_dict()  # every release
    assert config["options"] == {"log_measurements": False, "catch_up": False, "off_state": "plain"}
