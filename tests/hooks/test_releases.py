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
from tests.sglang.releases import RELEASES, defined_in_source

from sgtrace.graphs.build import Project
from sgtrace.graphs.source import SourceTree
from sgtrace.hooks.apply import PatchStatus, generate_runtime_hook, patch_source
from sgtrace.hooks.sites import locate_sites
from sgtrace.names import QualName
from sgtrace.payload.config import (
    NAMES_KEY,
    PLAIN_NAMES_KEY,
    HookOptions,
    OffState,
    decide_caller_module,
)
from sgtrace.payload.policy import PolicyConfig
from sgtrace.sglang.family import Family, family_of_release
from sgtrace.sglang.plain_names import plain_off_names_in
from sgtrace.sglang.release_names import runtime_names_in
from sgtrace.sglang.runtime_names import runtime_names

pytestmark = [pytest.mark.releases, pytest.mark.network]


SWITCHING = [v for v in RELEASES if family_of_release(v).can_switch]
# The names themselves are checked on every release by tests/sglang/test_map_releases.py; the
# tests here check how upstream uses them, which is what the payload relies on.
NAMES = runtime_names(Family.ZERO_STEP_STATES)


@pytest.mark.parametrize("version", RELEASES)
def test_release_sites_names_patch_and_revert(
    version: str,
    sglang_source: Callable[[str], SourceTree],
    sglang_project: Callable[[str], Project],
    tmp_path: Path,
) -> None:
    tree = sglang_source(version)
    spec = locate_sites(tree, sglang_project(version))
    expected = family_of_release(version)
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

    for options in (HookOptions(), HookOptions(off_state=OffState.PLAIN)):  # both off states
        applied = patch_source(copy_tree, policy, write=True, spec=spec, options=options)
        assert applied.status is PatchStatus.APPLIED
        for rel in files:
            compile((copy / rel).read_bytes(), rel, "exec")
        again = patch_source(copy_tree, policy, write=True, spec=spec, options=options)
        assert again.status is PatchStatus.ALREADY_PRESENT
        assert patch_source(copy_tree, policy, revert=True).status is PatchStatus.REVERTED
        assert {rel: (copy / rel).read_bytes() for rel in files} == originals
        on_disk = sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file())
        assert on_disk == files

    generate_runtime_hook(tree, tmp_path / "hook", policy, spec)
    config = json.loads((tmp_path / "hook" / "sgtrace_hook.json").read_text())
    patched = [QualName(t["module"], t["qualname"]) for t in config["patch"].values()]
    assert all(name in spec.required for name in patched)
    assert config["can_switch"] is expected.can_switch
    assert config[NAMES_KEY] == runtime_names_in(tree.root).to_dict()  # the release's own
    assert config[PLAIN_NAMES_KEY] == plain_off_names_in(tree.root)[0].to_dict()  # every release


def class_node(root: Path, module: str, name: str) -> ast.ClassDef:
    path = root / (module.replace(".", "/") + ".py")
    found = [
        node
        for node in ast.parse(path.read_text("utf-8")).body
        if isinstance(node, ast.ClassDef) and node.name == name
    ]
    assert found, f"{module} defines no class {name}"
    return found[-1]


def self_attributes(cls: ast.ClassDef) -> set[str]:
    """The ``self.X`` its ``__init__`` assigns."""
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    return {
        target.attr
        for node in ast.walk(init)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    }


@pytest.mark.parametrize("version", SWITCHING)
def test_the_decode_path_of_off_finds_what_it_relies_on(
    version: str, sglang_source: Callable[[str], SourceTree]
) -> None:
    """fastverify.verify_as_decode reaches the names of the map (checked by the map's release
    walk) and the triton backend's ``topk``; checked in the source with ``ast``."""
    root = sglang_source(version).root
    triton = class_node(root, "sglang.srt.layers.attention.triton_backend", "TritonAttnBackend")
    assert "topk" in self_attributes(triton)
    # exactness: the verify's KV slots are read from req_to_token from seq_lens on, so the
    # decode metadata of seq_lens + 1 covers the verified token's slot
    calls = [
        node
        for path in (root / "sglang/srt/speculative").glob("*.py")
        for node in ast.walk(ast.parse(path.read_text("utf-8")))
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", "")).startswith(
            "assign_extend_cache_locs"
        )
    ]
    starts = {
        ast.unparse(k.value) for call in calls for k in call.keywords if k.arg == "start_offset"
    }
    assert "batch.seq_lens" in starts, starts


def module_bindings(tree: ast.Module) -> set[str]:
    """Names bound at a module's top level by imports, definitions and assignments."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def callers_of(tree: ast.Module, name: str) -> list[ast.FunctionDef]:
    return [
        fn
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef)
        and any(
            isinstance(c, ast.Call) and getattr(c.func, "id", None) == name for c in ast.walk(fn)
        )
    ]


@pytest.mark.parametrize("version", SWITCHING)
def test_the_lean_off_step_finds_what_it_replaces(
    version: str, sglang_source: Callable[[str], SourceTree]
) -> None:
    """offstep.LeanOffStep swaps module globals and worker methods: they must be looked up there.

    ``eagle_sample`` and ``fill_bonus_tokens_func`` are called by the verify body (in
    ``eagle_worker_common`` from 0.5.16, in ``eagle_worker_v2`` before; 0.5.14-0.5.15 launch the
    bonus kernel inline, so that part stays upstream's) through a module-level name, never a
    local import that would bypass the swap; the worker's module binds what the lean trivial
    input and stubs construct.
    """
    spec = sglang_source(version).root / "sglang/srt/speculative"
    worker_tree = ast.parse((spec / "eagle_worker_v2.py").read_text("utf-8"))
    common = spec / "eagle_worker_common.py"
    verify_tree = ast.parse(common.read_text("utf-8")) if common.exists() else worker_tree
    assert callers_of(verify_tree, NAMES.sample)
    for name in (NAMES.sample, NAMES.fill_bonus):
        if not callers_of(verify_tree, name):  # 0.5.14-0.5.15 launch the bonus kernel inline:
            assert name not in module_bindings(verify_tree)  # that part is not replaced there
            continue
        assert name in module_bindings(verify_tree), name
        (caller,) = callers_of(verify_tree, name)
        local = {
            (a.asname or a.name)
            for node in ast.walk(caller)
            if isinstance(node, ast.ImportFrom)
            for a in node.names
        }
        assert name not in local, f"{caller.name} imports {name} locally"
    # the stubs' hidden size: where the method asks this helper, the lean stubs ask it too
    # (0.5.14 has none: its stubs stay upstream's)
    helper = NAMES.hidden_state_spec
    if any(fn.name == NAMES.stub_draft_extend for fn in callers_of(worker_tree, helper)):
        assert helper in module_bindings(worker_tree)


def draft_fields_read(fn: ast.FunctionDef) -> set[str]:
    """The fields ``fn`` reads of the draft input: ``batch.spec_info.X`` and ``name.X`` where
    ``name = batch.spec_info``."""
    names = {
        t.id
        for node in ast.walk(fn)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and ast.unparse(node.value or ast.Constant(None)) == "batch.spec_info"
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Name)
    }
    return {
        node.attr
        for node in ast.walk(fn)
        if isinstance(node, ast.Attribute)
        and (
            ast.unparse(node.value) == "batch.spec_info"
            or (isinstance(node.value, ast.Name) and node.value.id in names)
        )
    }


@pytest.mark.parametrize("version", SWITCHING)
def test_the_lean_relay_and_mamba_parts_find_what_they_rely_on(
    version: str,
    sglang_source: Callable[[str], SourceTree],
    sglang_project: Callable[[str], Project],
) -> None:
    """The future-map and mamba parts of offstep.LeanOffStep (0.5.14 and later).

    The decide site's caller module (the scheduler's) calls ``resolve_forward_inputs(batch,
    self.future_map)`` through a module-level name (the lean step finds the map there); the
    map has the two methods and the fields the lean relay uses; the zero-step step's trivial
    verify input reads nothing of the draft input but its bonus tokens (what the lean resolve
    gathers); where ``commit_mamba_states_after_verify`` asks a module-level
    ``mambaish_config``, it returns at once when that is None (what the lean part does without
    asking again).
    """
    tree = sglang_source(version)
    spec = locate_sites(tree, sglang_project(version))
    caller = spec.decide.caller.module
    assert decide_caller_module(spec.runtime_config()["sites"]) == caller  # what it is given
    scheduler = ast.parse((tree.root / (caller.replace(".", "/") + ".py")).read_text("utf-8"))
    assert NAMES.resolve_inputs in module_bindings(scheduler)
    runs = [
        fn
        for fn in callers_of(scheduler, NAMES.resolve_inputs)
        if f"{NAMES.resolve_inputs}(batch, self.future_map)" in ast.unparse(fn)
    ]
    assert runs, f"{caller} never resolves a batch's inputs through the future map"
    future_map = class_node(tree.root, "sglang.srt.managers.overlap_utils", NAMES.future_map_class)
    fields = {"output_tokens_buf", "spec_algo", "need_topk", "draft_probs_buf", "device"}
    assigned = {
        t.attr
        for node in ast.walk(future_map)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Attribute) and ast.unparse(t.value) == "self"
    }
    assert fields <= assigned, fields - assigned
    worker = class_node(tree.root, "sglang.srt.speculative.eagle_worker_v2", "EAGLEWorkerV2")
    (trivial,) = [n for n in worker.body if getattr(n, "name", "") == NAMES.trivial_input]
    assert draft_fields_read(trivial) == {"bonus_tokens"}

    spec_dir = tree.root / "sglang/srt/speculative"
    for path in spec_dir.glob("*.py"):
        module = ast.parse(path.read_text("utf-8"))
        commit = [
            n
            for n in module.body
            if isinstance(n, ast.FunctionDef) and n.name == NAMES.commit_mamba
        ]
        if not commit or NAMES.mamba_config_check not in module_bindings(module):
            continue  # 0.5.14 asks the model runner: that part stays upstream's there
        body = [s for s in commit[0].body if not isinstance(s, ast.Expr)]  # past the docstring
        assert ast.unparse(body[0]) == "model_runner = target_worker.model_runner"
        assert ast.unparse(body[1]) == (
            f"if {NAMES.mamba_config_check}(model_runner.model_config) is None:\n    return"
        )


@pytest.mark.parametrize("version", SWITCHING)
def test_the_lean_sample_finds_upstreams_sampling_switches(
    version: str, sglang_source: Callable[[str], SourceTree]
) -> None:
    """offstep_check.upstream_knobs reads the values upstream read from its environment."""
    root = sglang_source(version).root
    probe = (root / (NAMES.async_probe_module.replace(".", "/") + ".py")).read_text()
    assert f"{NAMES.async_probe_envs}.{NAMES.sanitize_nan_logits}.get()" in probe
