"""The hook on every SGLang release from 0.5.9 to 0.5.23: sites, names, patch, revert.

Downloads each release once (``sglang_source`` fixture of tests/conftest.py, cached).
"""

from __future__ import annotations

import ast
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from sgtrace.graphs.build import Project
from sgtrace.graphs.source import SourceTree
from sgtrace.hooks.apply import PatchStatus, generate_runtime_hook, patch_source
from sgtrace.hooks.policy import PolicyConfig
from sgtrace.hooks.sites import locate_sites
from sgtrace.hooks.spec import ReleaseFamily
from sgtrace.names import QualName

RELEASES = (
    "0.5.9", "0.5.10", "0.5.10.post1", "0.5.11", "0.5.12", "0.5.12.post1", "0.5.13",
    "0.5.13.post1", "0.5.14", "0.5.15", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18", "0.5.19",
    "0.5.20", "0.5.21", "0.5.22", "0.5.23",
)  # fmt: skip
FIRST_ZERO_STEP = (0, 5, 14)

pytestmark = [pytest.mark.releases, pytest.mark.network]


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".post")[0].split("."))


def defined_in_source(root: Path, name: QualName) -> bool:
    """Whether ``name`` is defined in its module file, checked with ``ast`` (not the engine)."""
    path = root / (name.module.replace(".", "/") + ".py")
    body = ast.parse(path.read_text("utf-8")).body
    for part in name.qualname.split("."):
        found = [
            node
            for node in body
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.name == part
        ]
        if not found:
            return False
        body = found[-1].body
    return True


@pytest.mark.parametrize("version", RELEASES)
def test_release_sites_names_patch_and_revert(
    version: str,
    sglang_source: Callable[[str], SourceTree],
    sglang_project: Callable[[str], Project],
    tmp_path: Path,
) -> None:
    tree = sglang_source(version)
    spec = locate_sites(tree, sglang_project(version))
    expected = (
        ReleaseFamily.ZERO_STEP_STATES
        if version_key(version) >= FIRST_ZERO_STEP
        else ReleaseFamily.OBSERVE_ONLY
    )
    assert spec.family is expected, spec.summary()
    missing = [str(n) for n in spec.required if not defined_in_source(tree.root, n)]
    assert missing == [], f"{version}: the hook relies on names the source lacks: {missing}"

    copy = tmp_path / "src"
    files = sorted({spec.decide.file, spec.attach.file})
    for rel in files:
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(tree.root / rel, copy / rel)
    originals = {rel: (copy / rel).read_bytes() for rel in files}
    copy_tree = SourceTree(copy, ("sglang",), f"copy of {tree.label}")
    policy = PolicyConfig()

    applied = patch_source(copy_tree, policy, write=True, spec=spec)
    assert applied.status is PatchStatus.APPLIED
    for rel in files:
        compile((copy / rel).read_bytes(), rel, "exec")
    assert patch_source(copy_tree, policy, write=True, spec=spec).status is (
        PatchStatus.ALREADY_PRESENT
    )
    assert patch_source(copy_tree, policy, revert=True).status is PatchStatus.REVERTED
    assert {rel: (copy / rel).read_bytes() for rel in files} == originals
    assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()) == files

    generate_runtime_hook(tree, tmp_path / "hook", policy, spec)
    config = json.loads((tmp_path / "hook" / "sgtrace_hook.json").read_text())
    patched = [QualName(t["module"], t["qualname"]) for t in config["patch"].values()]
    assert all(name in spec.required for name in patched)
    assert config["can_switch"] is (expected is ReleaseFamily.ZERO_STEP_STATES)
