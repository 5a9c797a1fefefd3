"""The engine on real SGLang releases (0.5.9, 0.5.16 and the newest), fetched once and cached.

Expectations are derived from the release's own text with the stdlib ``ast`` (where a call
stands, what encloses it, which ``if`` guards it), an oracle independent of the libcst engine;
for 0.5.9 and 0.5.16 the known lines are also pinned. The newest release's lines are never
hard-coded.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from sgtrace.graphs.build import Project, build_call_graph
from sgtrace.graphs.find import Definition, FindResult, find_name
from sgtrace.graphs.model import CallGraph, CallSite
from sgtrace.names import QualName
from tests.conftest import NEWEST, OLDEST
from tests.graphs.helpers import assert_edges, edge_lines, format_edges

pytestmark = pytest.mark.network

VERSIONS = [OLDEST, "0.5.16", NEWEST]
SCHEDULER = "sglang/srt/managers/scheduler.py"
EAGLE_V2 = "sglang/srt/speculative/eagle_worker_v2.py"
TP_FORWARD = QualName("sglang.srt.managers.tp_worker", "TpModelWorker.forward_batch_generation")
OTHER_SPEC_WORKERS = ("eagle_worker", "multi_layer_", "standalone_", "ngram_")

ProjectOf = Callable[[str], Project]


# -- the ast oracle ----------------------------------------------------------------------------
@dataclass(frozen=True)
class AstCall:
    """A call as the stdlib parser sees it: line, enclosing qualname, guard, callee text."""

    line: int
    caller: str
    guard: str | None
    callee: str


@cache
def parsed(path: Path) -> tuple[str, ast.Module]:
    source = path.read_text(encoding="utf-8")
    return source, ast.parse(source)


def module_of(rel: str) -> str:
    return rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def ast_calls(path: Path) -> list[AstCall]:
    """Every call in the file with its enclosing ``__qualname__`` and ``if``/``while`` guards."""
    source, tree = parsed(path)
    lines = source.encode("utf-8").split(b"\n")
    found: list[AstCall] = []

    def text(node: ast.expr) -> str:  # ast.get_source_segment re-splits the file every call
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        chunk = lines[first : last + 1]
        chunk[-1] = chunk[-1][: node.end_col_offset]
        chunk[0] = chunk[0][node.col_offset :]
        return " ".join(b"\n".join(chunk).decode("utf-8").split())

    def walk(node: ast.AST, qual: list[str], kinds: list[str], guards: list[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = node.name if not kinds or kinds[-1] == "class" else f"<locals>.{node.name}"
            kind = "class" if isinstance(node, ast.ClassDef) else "def"
            for deco in node.decorator_list:
                walk(deco, qual, kinds, guards)
            for stmt in node.body:
                walk(stmt, [*qual, name], [*kinds, kind], [])
            return
        if isinstance(node, (ast.If, ast.While)):
            walk(node.test, qual, kinds, guards)
            for stmt in node.body:
                walk(stmt, qual, kinds, [*guards, text(node.test)])
            extra = [f"not ({text(node.test)})"] if isinstance(node, ast.If) else []
            for stmt in node.orelse:
                walk(stmt, qual, kinds, [*guards, *extra])
            return
        if isinstance(node, ast.Call):
            caller = ".".join(qual) if qual else "<module>"
            guard = " and ".join(guards) or None
            found.append(AstCall(node.lineno, caller, guard, text(node.func)))
        for child in ast.iter_child_nodes(node):
            walk(child, qual, kinds, guards)

    walk(tree, [], [], [])
    return found


def class_methods(path: Path, cls: str) -> dict[str, int]:
    """``name -> def line`` of the functions defined directly in class ``cls``."""
    _, tree = parsed(path)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return {
                f.name: f.lineno
                for f in node.body
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            }
    raise AssertionError(f"no class {cls} in {path}")


def method_definitions(root: Path, name: str) -> Iterator[tuple[str, str, int]]:
    """``(file, Class.name, line)`` for every method ``name`` defined in the package."""
    for path in sorted((root / "sglang").rglob("*.py")):
        if f"def {name}" not in path.read_text(encoding="utf-8", errors="replace"):
            continue
        _, tree = parsed(path)
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                line = class_methods(path, node.name).get(name)
                if line is not None:
                    yield path.relative_to(root).as_posix(), f"{node.name}.{name}", line


def line_of(path: Path, text: str) -> int:
    """The one line of ``path`` whose stripped text is ``text``."""
    lines = [
        n
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if line.strip() == text
    ]
    assert len(lines) == 1, f"{text!r} stands on lines {lines} of {path}"
    return lines[0]


# -- find process_batch_result_decode ----------------------------------------------------------
KNOWN_FIND = {
    "0.5.9": (
        ("sglang/srt/managers/scheduler_output_processor_mixin.py", 417),
        ("sglang/srt/managers/scheduler.py", 2453),
    ),
    "0.5.16": (
        ("sglang/srt/managers/scheduler_components/batch_result_processor.py", 651),
        ("sglang/srt/managers/scheduler.py", 3570),
    ),
}


def expected_find(root: Path) -> FindResult:
    """What ``find process_batch_result_decode`` must report, derived from the source."""
    definitions = list(method_definitions(root, "process_batch_result_decode"))
    assert len(definitions) == 1, definitions
    def_file, def_qual, def_line = definitions[0]
    callee = QualName(module_of(def_file), def_qual)
    scheduler = root / SCHEDULER
    calls = [c for c in ast_calls(scheduler) if c.callee.endswith(".process_batch_result_decode")]
    assert len(calls) == 1, calls
    call = calls[0]
    text = scheduler.read_text(encoding="utf-8").splitlines()[call.line - 1].strip()
    how = "mro" if call.callee == "self.process_batch_result_decode" else "attribute-type"
    site = CallSite(
        SCHEDULER,
        call.line,
        QualName(module_of(SCHEDULER), call.caller),
        callee,
        text,
        call.guard,
        how,
    )
    return FindResult((Definition(def_file, def_line, callee, "method"),), (site,))


@pytest.mark.parametrize("version", VERSIONS)
def test_find_process_batch_result_decode(version: str, sglang_project: ProjectOf) -> None:
    project = sglang_project(version)
    expected = expected_find(project.tree.root)
    assert find_name(project, "process_batch_result_decode") == expected
    site = expected.call_sites[0]
    assert (str(site.caller.qualname), site.guard) == (
        "Scheduler.process_batch_result",
        "batch.forward_mode.is_decode()",
    )
    if version in KNOWN_FIND:
        definition = expected.definitions[0]
        assert ((definition.file, definition.line), (site.file, site.line)) == KNOWN_FIND[version]
    else:  # the newest: the call stands where its text stands
        processor_call = "self.batch_result_processor.process_batch_result_decode(batch, result)"
        assert site.line == line_of(project.tree.root / SCHEDULER, processor_call)


def test_find_on_0_5_9_names_the_mixin(sglang_project: ProjectOf) -> None:
    definition = find_name(sglang_project("0.5.9"), "process_batch_result_decode").definitions[0]
    assert str(definition.name) == (
        "sglang.srt.managers.scheduler_output_processor_mixin:"
        "SchedulerOutputProcessorMixin.process_batch_result_decode"
    )


# -- callgraph scheduler.py --------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
def test_scheduler_graph_links_decode_processing(version: str, sglang_project: ProjectOf) -> None:
    project = sglang_project(version)
    expected = expected_find(project.tree.root).call_sites[0]
    graph = build_call_graph(project, [SCHEDULER])
    edge = (str(expected.caller), str(expected.callee), expected.how)
    assert_edges(graph, {edge})
    assert edge_lines(graph)[edge[:2]] == {expected.line}
    if version == "0.5.9":
        assert edge[1] == (
            "sglang.srt.managers.scheduler_output_processor_mixin:"
            "SchedulerOutputProcessorMixin.process_batch_result_decode"
        )


# -- callgraph eagle_worker_v2.py --------------------------------------------------------------
def expected_eagle_edges(root: Path) -> dict[tuple[str, str], set[int]]:
    """Edges out of ``EAGLEWorkerV2.forward_batch_generation`` and the private helpers it calls
    on ``self``: each ``self.draft_worker.M(...)`` with ``M`` defined in ``EagleDraftWorker``,
    ``self.target_worker.forward_batch_generation(...)`` and ``self.verify(...)``."""
    path = root / EAGLE_V2
    module = module_of(EAGLE_V2)
    worker = class_methods(path, "EAGLEWorkerV2")
    draft = class_methods(path, "EagleDraftWorker")
    calls = ast_calls(path)
    entry = "EAGLEWorkerV2.forward_batch_generation"
    helpers = {
        f"EAGLEWorkerV2.{c.callee[5:]}"
        for c in calls
        if c.caller == entry and c.callee.startswith("self._") and c.callee[5:] in worker
    }
    expected: dict[tuple[str, str], set[int]] = {}
    for call in calls:
        if call.caller not in {entry, *helpers}:
            continue
        caller = f"{module}:{call.caller}"
        callee = None
        if call.callee.startswith("self.draft_worker.") and call.callee[18:] in draft:
            callee = f"{module}:EagleDraftWorker.{call.callee[18:]}"
        elif call.callee == "self.target_worker.forward_batch_generation":
            callee = str(TP_FORWARD)
        elif call.callee == "self.verify":
            callee = f"{module}:EAGLEWorkerV2.verify"
        if callee is not None:
            expected.setdefault((caller, callee), set()).add(call.line)
    return expected


@pytest.mark.parametrize("version", VERSIONS)
def test_eagle_worker_v2_forward_links(version: str, sglang_project: ProjectOf) -> None:
    project = sglang_project(version)
    graph = build_call_graph(project, [EAGLE_V2])
    expected = expected_eagle_edges(project.tree.root)
    module = module_of(EAGLE_V2)
    required = {
        f"{module}:EagleDraftWorker.draft",
        f"{module}:EAGLEWorkerV2.verify",
        f"{module}:EagleDraftWorker._draft_extend_for_prefill",
        f"{module}:EagleDraftWorker._draft_extend_for_decode",
        str(TP_FORWARD),
    }
    assert required <= {callee for _, callee in expected}, sorted(expected)
    assert_edges(graph, set(expected))
    lines = edge_lines(graph)
    assert {edge: lines[edge] for edge in expected} == expected


def test_eagle_worker_v2_forward_links_directly_on_0_5_9(sglang_project: ProjectOf) -> None:
    graph = build_call_graph(sglang_project("0.5.9"), [EAGLE_V2])
    caller = "sglang.srt.speculative.eagle_worker_v2:EAGLEWorkerV2.forward_batch_generation"
    module = "sglang.srt.speculative.eagle_worker_v2"
    assert_edges(
        graph,
        {
            (caller, f"{module}:EagleDraftWorker.draft", "property"),
            (caller, f"{module}:EAGLEWorkerV2.verify", "mro"),
            (caller, f"{module}:EagleDraftWorker._draft_extend_for_prefill", "property"),
            (caller, f"{module}:EagleDraftWorker._draft_extend_for_decode", "property"),
            (caller, str(TP_FORWARD), "property"),
        },
        {
            (caller, "sglang.srt.speculative.eagle_worker:EAGLEWorker.forward_batch_generation"),
            (caller, "sglang.srt.speculative.eagle_worker:EAGLEWorker.verify"),
            (caller, "sglang.srt.speculative.eagle_worker:EAGLEWorker.draft"),
        },
    )


def is_other_spec_worker(name: QualName) -> bool:
    module = name.module
    short = module.rsplit(".", 1)[-1]
    return module.startswith("sglang.srt.speculative.") and (
        short == "eagle_worker" or short.startswith(OTHER_SPEC_WORKERS[1:])
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_eagle_worker_v2_never_links_other_spec_workers(
    version: str, sglang_project: ProjectOf
) -> None:
    project = sglang_project(version)
    # the risk is real: other workers define methods of the same names
    others = [m for m in project.index.modules if is_other_spec_worker(QualName(m, "<module>"))]
    assert others, "no other speculative worker modules in this release"
    same_names = [
        d
        for d in method_definitions(project.tree.root, "forward_batch_generation")
        if is_other_spec_worker(QualName(module_of(d[0]), d[1]))
    ]
    assert same_names
    graph: CallGraph = build_call_graph(project, [EAGLE_V2])
    leaking = [s for s in graph.sites if is_other_spec_worker(s.callee)]
    assert leaking == [], format_edges(graph)
