"""Run the passes and build call graphs: the entry point of the static engine.

Passes, in order (as PyCG's ``analyze()`` lists them):

1. *index* — list the modules of the source tree (``index.SourceIndex``);
2. *collect* — summarise the target modules with the libcst visitors of ``collect.py``
   (cached by content hash, parsed in parallel when many);
3. *resolve* — resolve each call of the selected functions (``calls.py``), loading only the
   modules that resolution reaches;
4. *expand* — with ``--focus``/``--depth``, follow callees (or callers) across files.

>>> # project = Project(open_source("sglang==0.5.9"))
>>> # graph = build_call_graph(project, ["scheduler.py"], focus="Scheduler.process_batch_result")
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from sgtrace.errors import TargetNotFoundError
from sgtrace.graphs.cache import SummaryCache
from sgtrace.graphs.index import PARALLEL_MIN_FILES, SourceIndex, engine_stamp, paused_gc
from sgtrace.graphs.model import (
    CallGraph,
    CallSite,
    Node,
    UnresolvedCall,
    external_nodes,
    name_key,
    site_order,
    unresolved_order,
)
from sgtrace.graphs.progress import Progress, ProgressSink, Stage
from sgtrace.graphs.source import SourceTree, default_cache_dir
from sgtrace.names import MODULE_LEVEL, QualName

if TYPE_CHECKING:  # resolution is imported when it first runs: a warm run needs none of it
    from sgtrace.graphs.calls import Resolution
    from sgtrace.graphs.resolve import Resolver


class Direction(str, Enum):
    CALLEES = "callees"
    CALLERS = "callers"
    BOTH = "both"


@dataclass(frozen=True)
class TargetChoice:
    """The modules a TARGET names, and a note when a bare file name was ambiguous."""

    modules: tuple[str, ...]
    note: str = ""


class Project:
    """A source tree with its index, summary cache and resolver: what every query needs."""

    def __init__(
        self,
        tree: SourceTree,
        cache_dir: Path | None = None,
        use_cache: bool = True,
        progress: ProgressSink | None = None,
    ) -> None:
        self.tree = tree
        cache = SummaryCache((cache_dir or default_cache_dir()) if use_cache else None)
        self.index = SourceIndex(tree, cache, progress=progress)
        self.progress = progress  # told how long work advances (progress.ThrottledProgress)
        self._resolver: Resolver | None = None
        self._resolved: dict[QualName, Resolution] = {}

    @property
    def resolver(self) -> Resolver:
        """Name and type resolution over the index (made, and imported, on first use)."""
        if self._resolver is None:
            from sgtrace.graphs.resolve import Resolver

            self._resolver = Resolver(self.index)
        return self._resolver

    def prefetch_imports(self, modules: Sequence[str]) -> None:
        """Summarise, in one parallel batch, the modules that ``modules`` import: resolution
        will ask for most of them one by one otherwise.

        For a few targets, the imports are read from their cheap outlines, so that the targets'
        own libcst parses join the same batch. Many targets fill the pool's batch on their own:
        they are parsed first, and their imports are then read from their full summaries (most
        of them are targets already), which spares an outline pass over every target.
        """
        index = self.index
        if len(modules) >= PARALLEL_MIN_FILES:
            index.load(modules)
            index.load(imported_modules(index, modules), full=False)
            return
        index.load(modules, full=False)
        wanted = imported_modules(index, modules)
        index.load_many([*((m, True) for m in modules), *((m, False) for m in wanted)])

    def resolution(self, caller: QualName) -> Resolution:
        if caller not in self._resolved:
            from sgtrace.graphs.calls import resolve_calls

            self._resolved[caller] = resolve_calls(self.resolver, caller)
        return self._resolved[caller]

    def callees(self, caller: QualName) -> tuple[CallSite, ...]:
        """The resolved calls made inside ``caller``."""
        return self.resolution(caller).sites

    def node(self, name: QualName) -> Node | None:
        from sgtrace.graphs.summary import DefKind  # loaded with the summaries

        summary = self.index.summary(name.module)
        if summary is None:
            return None
        if name.qualname == MODULE_LEVEL:
            return Node(name, DefKind.MODULE.value, summary.file, 1)
        info = summary.functions.get(name.qualname) or summary.classes.get(name.qualname)
        if info is None:
            return None
        kind = getattr(info, "kind", DefKind.CLASS)
        return Node(name, kind.value, summary.file, info.line)

    def definitions_in(self, module: str) -> list[QualName]:
        """Every function, class body and the module level of ``module``."""
        summary = self.index.summary(module)
        if summary is None:
            return []
        names = [QualName.module_level(module)]
        names += [QualName(module, q) for q in summary.functions]
        names += [QualName(module, q) for q in summary.classes]
        return sorted(names, key=name_key)

    def choose_targets(self, targets: Sequence[str]) -> TargetChoice:
        """Resolve TARGETs: paths, bare file names, dotted module or package names."""
        modules: list[str] = []
        notes: list[str] = []
        for target in targets:
            chosen, note = self._choose(target)
            modules.extend(chosen)
            if note:
                notes.append(note)
        return TargetChoice(tuple(dict.fromkeys(modules)), "\n".join(notes))

    def _choose(self, target: str) -> tuple[list[str], str]:
        index = self.index
        path = Path(target)
        if path.suffix == ".py" and path.exists():
            try:
                rel = self.tree.relative(path)
            except ValueError:
                rel = ""
            if rel in index.by_file:
                return [index.by_file[rel].module], ""
        if target in index.by_file:
            return [index.by_file[target].module], ""
        folder = self.tree.folder(path) if path.is_dir() else target.rstrip("/") + "/"
        inside = sorted(m.module for m in index.modules.values() if m.rel.startswith(folder))
        if folder != "/" and inside:  # a directory, by path or relative to the source root
            return inside, ""
        if target.endswith(".py"):
            matches = sorted(
                (m.rel.count("/"), m.rel, m.module)
                for m in index.modules.values()
                if m.rel == target or m.rel.endswith("/" + target)
            )
            if matches:
                note = ""
                if len(matches) > 1:
                    others = ", ".join(m[1] for m in matches[1:])
                    note = f"{target}: chose {matches[0][1]}; also matching: {others}"
                return [matches[0][2]], note
        else:  # a module or package; a namespace package (no __init__.py) has no module
            prefix = target + "."
            found = sorted(m for m in index.modules if m == target or m.startswith(prefix))
            if found:
                return found, ""
        raise TargetNotFoundError(self._missing(target))

    def _missing(self, target: str) -> str:
        from sgtrace.errors import suggest

        # compare dotted module names: the last part of "mian.py" must be "mian", not "py"
        if Path(target).is_dir():
            return (
                f"directory {target!r} holds no module of {self.tree.label} ({self.tree.root}); "
                f"give a directory inside it, or analyse that one with --source {target}"
            )
        modules = self.index.modules
        wanted = target.removesuffix(".py").replace("/", ".")
        close = suggest(wanted, list(modules), limit=3)
        if target.endswith(".py"):
            close = [modules[m].rel for m in close]
        hint = (
            f"; did you mean {', '.join(close)}?"
            if close
            else ("; give a path, a file name such as scheduler.py, or a dotted module name")
        )
        return f"target {target!r} is not in {self.tree.label} ({self.tree.root}){hint}"


def build_call_graph(
    project: Project,
    targets: Sequence[str] = (),
    focus: Sequence[QualName] = (),
    depth: int | None = None,
    direction: Direction = Direction.CALLEES,
) -> CallGraph:
    """The call graph of ``targets`` (every definition in them and what it calls), or, with
    ``focus``, of the focused functions expanded ``depth`` levels along ``direction``."""
    modules = project.choose_targets(targets).modules if targets else ()
    project.prefetch_imports([*modules, *(f.module for f in focus)])
    roots = tuple(focus) or tuple(n for m in modules for n in project.definitions_in(m))
    limit = depth if depth is not None else (None if focus else 1)
    sites: set[CallSite] = set()
    unresolved: set[UnresolvedCall] = set()
    if direction in (Direction.CALLEES, Direction.BOTH):
        callers = _walk(project, roots, limit, forward=True, restrict=None if focus else set(roots))
        for done, caller in enumerate(callers, 1):
            if project.progress is not None and (done % 1000 == 0 or done == len(callers)):
                project.progress(Progress(Stage.RESOLVE, done, len(callers)))
            resolution = project.resolution(caller)
            sites.update(resolution.sites)
            unresolved.update(resolution.unresolved)
    if direction in (Direction.CALLERS, Direction.BOTH):
        for site in _callers(project, roots, limit if limit is not None else 1):
            sites.add(site)
    names = set(roots) | {s.caller for s in sites} | {s.callee for s in sites}
    nodes = {n: node for n in names if (node := project.node(n)) is not None}
    nodes.update({n: node for n, node in external_nodes(sites).items() if n not in nodes})
    return CallGraph(
        nodes,
        sorted(sites, key=site_order),
        sorted(unresolved, key=unresolved_order),
        tuple(sorted(roots, key=name_key)),
        project.tree.label,
        shows_callers=direction is not Direction.CALLEES,
        shows_callees=direction is not Direction.CALLERS,
    )


def _walk(
    project: Project,
    roots: Sequence[QualName],
    limit: int | None,
    forward: bool,
    restrict: set[QualName] | None,
) -> list[QualName]:
    """Callers whose calls are expanded: the roots, then callees level by level."""
    seen = dict.fromkeys(roots)  # an ordered set: membership stays O(1) on a whole package
    frontier = list(seen)
    level = 1
    while frontier and (limit is None or level < limit):
        nxt = []
        for caller in frontier:
            for site in project.callees(caller):
                if site.callee not in seen and project.node(site.callee) is not None:
                    seen[site.callee] = None
                    nxt.append(site.callee)
        frontier = nxt
        level += 1
    return list(seen) if restrict is None else [s for s in seen if s in restrict]


def _callers(project: Project, roots: Sequence[QualName], limit: int) -> set[CallSite]:
    found: set[CallSite] = set()
    frontier = list(roots)
    for _ in range(limit):
        nxt = []
        for callee in frontier:
            for site in find_callers(project, callee):
                if site not in found:
                    found.add(site)
                    nxt.append(site.caller)
        frontier = nxt
    return found


def find_callers(project: Project, callee: QualName) -> list[CallSite]:
    """Every call site in the source that resolves to ``callee`` (candidate files are those
    that mention its name; only they are parsed)."""
    word = "__init__" if callee.short == "__init__" else callee.short
    owner = callee.owner
    if word == "__init__" and owner is not None:
        word = owner.short
    modules = project.index.mentioning(word)
    if word != callee.short:  # a class: also where its factories are called
        modules += [
            m
            for f in _factories_of(project, modules, word)
            for m in project.index.mentioning(f)
            if m not in modules
        ]
    project.index.load(modules)
    sites: list[CallSite] = []
    for module in modules:
        for caller in project.definitions_in(module):
            sites.extend(s for s in project.callees(caller) if s.callee == callee)
    return sorted(sites)


def _factories_of(project: Project, modules: list[str], class_name: str) -> set[str]:
    """Names of functions in ``modules`` that return the class ``class_name`` itself."""
    project.index.load(modules, full=False)
    names = set()
    for module in modules:
        summary = project.index.summary(module)
        for info in summary.functions.values() if summary else ():
            if any(v.text.rsplit(".", 1)[-1] == class_name for v in info.returned):
                names.add(info.qualname.rsplit(".", 1)[-1])
    return names


def cached_call_graph(
    project: Project,
    targets: Sequence[str] = (),
    focus: Sequence[QualName] = (),
    depth: int | None = None,
    direction: Direction = Direction.CALLEES,
) -> CallGraph:
    """:func:`build_call_graph`, answered from the cache when no file of the tree changed since
    the same request (the key holds the request and every file's path, size and mtime)."""
    key = "graph-" + _request_key(project, targets, focus, depth, direction)
    with paused_gc():
        cached = project.index.cache.get_any(key, CallGraph)
        if isinstance(cached, CallGraph):
            return cached
        graph = build_call_graph(project, targets, focus, depth, direction)
    project.index.cache.put_any(key, graph, CallGraph)
    return graph


def cached_rendering(
    project: Project,
    render: Callable[[CallGraph], str],
    form: str | None,
    targets: Sequence[str] = (),
    focus: Sequence[QualName] = (),
    depth: int | None = None,
    direction: Direction = Direction.CALLEES,
) -> str:
    """``render`` applied to :func:`cached_call_graph`, the text itself answered from the cache
    under the same key plus ``form`` (which names the rendering: ``json``, ``text``...). A warm
    run then reads its output back instead of loading and rendering a graph that, for a whole
    package, takes seconds. ``form=None`` renders without keeping the text."""
    key = "output-" + _request_key(project, targets, focus, depth, direction, form or "")
    cached = project.index.cache.get_any(key, str) if form is not None else None
    if isinstance(cached, str):
        return cached
    with paused_gc():
        text = render(cached_call_graph(project, targets, focus, depth, direction))
    if form is not None:
        project.index.cache.put_any(key, text, str)
    return text


def _request_key(
    project: Project,
    targets: Sequence[str],
    focus: Sequence[QualName],
    depth: int | None,
    direction: Direction,
    *extra: str,
) -> str:
    """A digest of a call-graph request, of every analysed file's path, size and mtime, and of
    sgtrace's own files (another sgtrace may build or render differently)."""
    request = repr(
        (sorted(targets), sorted(map(str, focus)), depth, direction.value, project.tree.label)
    )
    parts = (project.index.stamp, engine_stamp(), request, *extra)
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


def imported_modules(index: SourceIndex, modules: Sequence[str]) -> list[str]:
    """The modules of the tree that ``modules`` import (at module level or in functions)."""
    wanted: list[str] = []
    for module in modules:
        summary = index.summary(module)
        if summary is None:
            continue
        refs = [*summary.imports.values()]
        refs += [r for f in summary.functions.values() for r in f.imports.values()]
        for ref in refs:
            for name in (ref.module, f"{ref.module}.{ref.name}" if ref.name else ""):
                if name in index.modules:
                    wanted.append(name)
    return wanted
