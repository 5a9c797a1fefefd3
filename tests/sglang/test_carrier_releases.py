"""What the decision carrier (``sgtrace.payload.carry``) assumes of SGLang, on every release,
with the release's own names (:func:`sgtrace.sglang.release_names.runtime_names_in`): the request
receiver component's from 0.5.13, the scheduler's own ``Scheduler.recv_requests`` before.

* the receiving module calls the broadcast by its module global (never a local import, which the
  carrier's swap of the global would miss), with the source rank as ``src=`` and the caller's
  global rank second, and every call is made while the receiving method runs (in it, or in a
  method of its class it calls: a broadcast of anything else would carry decisions too);
* the broadcast's parameters are ``(data, rank, dist_group, src, ...)`` and it returns the
  source's ``data`` itself on the source (so the marker must be stripped there too);
* the scheduler calls the receiving method in its event loops: once per iteration.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

from sgtrace.graphs.source import SourceTree
from sgtrace.payload.config import SglangNames
from sgtrace.sglang.release_names import runtime_names_in
from tests.sglang.releases import RELEASES

pytestmark = [pytest.mark.releases, pytest.mark.network]


def _parse(root: Path, module: str) -> ast.Module:
    return ast.parse((root / (module.replace(".", "/") + ".py")).read_text("utf-8"))


def _calls_of(tree: ast.AST, name: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name
    ]


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef:
    return next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name)


def _receiving_methods(cls: ast.ClassDef, names: SglangNames) -> list[ast.FunctionDef]:
    """The receiving method and the methods of its class it calls on ``self``."""
    receive = _method(cls, names.receive_requests)
    called = {
        node.func.attr
        for node in ast.walk(receive)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "self"
    }
    return [receive, *(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name in called)]


@pytest.mark.parametrize("version", RELEASES)
def test_the_receiver_broadcasts_through_its_module_global(
    version: str, sglang_source: Callable[[str], SourceTree]
) -> None:
    root = sglang_source(version).root
    names = runtime_names_in(root)
    module = _parse(root, names.receiver_module)
    name = names.broadcast_requests
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
        if isinstance(node, ast.ClassDef) and node.name == names.receiver_class
    )
    inside = [call for m in _receiving_methods(receiver, names) for call in _calls_of(m, name)]
    everywhere = _calls_of(module, name)
    assert inside and len(inside) == len(everywhere), (
        f"{version}: calls outside the receiving method"
    )
    for call in inside:
        keywords = {keyword.arg for keyword in call.keywords}
        assert "src" in keywords and len(call.args) >= 2, f"{version}: {ast.unparse(call)}"


@pytest.mark.parametrize("version", RELEASES)
def test_the_broadcast_returns_the_sources_own_list(
    version: str, sglang_source: Callable[[str], SourceTree]
) -> None:
    root = sglang_source(version).root
    utils = _parse(root, "sglang.srt.utils.common")
    function = next(
        node
        for node in utils.body
        if isinstance(node, ast.FunctionDef)
        and node.name == runtime_names_in(root).broadcast_requests
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


@pytest.mark.parametrize("version", RELEASES)
def test_the_scheduler_receives_once_per_loop_iteration(
    version: str, sglang_source: Callable[[str], SourceTree]
) -> None:
    """Every event loop receives at most once (directly, or through a scheduler method that
    does, as ``ingest_requests`` from 0.5.20), and the overlap loop does receive (through the
    request receiver from 0.5.13, itself before)."""
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
    receiving = {runtime_names_in(root).receive_requests}
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


@pytest.mark.parametrize("version", RELEASES)
def test_new_generation_requests_are_named_as_the_hook_counts_them(
    version: str, sglang_source: Callable[[str], SourceTree]
) -> None:
    """The hook's decisions on arrivals count what the scheduler received by class name
    (``sgtrace.payload.facts.generate_requests``): one request is a ``...GenerateReqInput``,
    a batch of them one with a ``batch`` list of them; an embedding request is neither."""
    io_struct = _parse(sglang_source(version).root, "sglang.srt.managers.io_struct")
    classes = {node.name: node for node in io_struct.body if isinstance(node, ast.ClassDef)}
    assert "TokenizedGenerateReqInput" in classes, version
    batch = classes["BatchTokenizedGenerateReqInput"]
    fields = {
        node.target.id: ast.unparse(node.annotation)
        for node in batch.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }
    assert fields.get("batch") == "List[TokenizedGenerateReqInput]", (version, fields)
    embedding = [name for name in classes if "Embedding" in name and "GenerateReqInput" in name]
    assert embedding == [], (version, embedding)
