"""What the decision carrier (``sgtrace.payload.carry``) assumes of SGLang, on every release
whose structure has the request receiver (0.5.13 on; the hook switches from 0.5.14).

* the receiving class calls the broadcast by its module global (never a local import, which the
  carrier's swap of the global would miss), with the source rank as ``src=`` and the caller's
  global rank second, and every call is inside the receiving class;
* the broadcast's parameters are ``(data, rank, dist_group, src, ...)`` and it returns the
  source's ``data`` itself on the source (so the marker must be stripped there too);
* the scheduler calls ``request_receiver.recv_requests`` in its event loops: once per iteration.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

from sgtrace.graphs.source import SourceTree
from sgtrace.sglang.family import Family, release_key
from sgtrace.sglang.runtime_names import runtime_names
from tests.sglang.releases import RELEASES

pytestmark = [pytest.mark.releases, pytest.mark.network]

NAMES = runtime_names(Family.ZERO_STEP_STATES)
WITH_RECEIVER = [v for v in RELEASES if release_key(v) >= (0, 5, 13)]


def _parse(root: Path, module: str) -> ast.Module:
    return ast.parse((root / (module.replace(".", "/") + ".py")).read_text("utf-8"))


def _calls_of(tree: ast.AST, name: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name
    ]


@pytest.mark.parametrize("version", WITH_RECEIVER)
def test_the_receiver_broadcasts_through_its_module_global(
    version: str, sglang_source: Callable[[str], SourceTree]
) -> None:
    module = _parse(sglang_source(version).root, NAMES.receiver_module)
    name = NAMES.broadcast_requests
    local_imports = [
        node.lineno
        for function in ast.walk(module)
        if isinstance(function, ast.FunctionDef)
        for node in ast.walk(function)
        if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names)
    ]
    assert local_imports == [], f"{version}: {name} imported inside functions at {local_imports}"
    receiver = next(
        node
        for node in module.body
        if isinstance(node, ast.ClassDef) and node.name == NAMES.receiver_class
    )
    inside, everywhere = _calls_of(receiver, name), _calls_of(module, name)
    assert inside and len(inside) == len(everywhere), f"{version}: calls outside the receiver"
    for call in inside:
        keywords = {keyword.arg for keyword in call.keywords}
        assert "src" in keywords and len(call.args) >= 2, f"{version}: {ast.unparse(call)}"


@pytest.mark.parametrize("version", WITH_RECEIVER)
def test_the_broadcast_returns_the_sources_own_list(
    version: str, sglang_source: Callable[[str], SourceTree]
) -> None:
    utils = _parse(sglang_source(version).root, "sglang.srt.utils.common")
    function = next(
        node
        for node in utils.body
        if isinstance(node, ast.FunctionDef) and node.name == NAMES.broadcast_requests
    )
    assert [a.arg for a in function.args.args[:4]] == ["data", "rank", "dist_group", "src"]
    source_branch = next(
        node
        for node in ast.walk(function)
        if isinstance(node, ast.If) and ast.unparse(node.test) == "rank == src"
    )
    returns = [n for n in ast.walk(source_branch) if isinstance(n, ast.Return)]
    assert ast.unparse(returns[0].value) == "data" if returns[0].value else False


def _attribute_calls(tree: ast.AST, names: set[str]) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in names
    ]


@pytest.mark.parametrize("version", WITH_RECEIVER)
def test_the_scheduler_receives_once_per_loop_iteration(
    version: str, sglang_source: Callable[[str], SourceTree]
) -> None:
    """Every event loop receives at most once (directly, or through a scheduler method that
    does, as ``ingest_requests`` from 0.5.20), and the overlap loop does receive."""
    root = sglang_source(version).root
    trees = {
        module: _parse(root, module)
        for module in ("sglang.srt.managers.scheduler", "sglang.srt.managers.scheduler_pp_mixin")
    }
    functions = [
        node
        for tree in trees.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
    ]
    receiving = {NAMES.receive_requests}
    receiving |= {
        f.name
        for f in functions
        if not f.name.startswith("event_loop") and _attribute_calls(f, receiving)
    }
    counts = {
        f.name: len(_attribute_calls(f, receiving))
        for f in functions
        if f.name.startswith("event_loop")
    }
    assert counts.get("event_loop_overlap") == 1, (version, counts)
    assert all(count <= 1 for count in counts.values()), (version, counts)
