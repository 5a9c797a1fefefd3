"""The text tree of a call graph, readable in 100 columns, with a legend of the edge labels.

Each function is written ``Qual.name`` (what ``--focus`` and ``find`` accept) and files relative
to the folder that all of the graph's files share, named in the header. A call is written
``LINES: Callee.name  [how]  (file:line)``: the call is on those lines of the caller's file,
the callee is defined at ``file:line``, and ``how`` is the rule that resolved the call. When a
line would pass :data:`WIDTH` columns, the callee's place goes on the next line. The footer
explains every label used.

>>> LEGEND[How.MRO]
'a method of self or cls, found through the class hierarchy (C3 MRO)'
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from dataclasses import dataclass, field

from sgtrace.graphs.model import CallGraph, CallSite
from sgtrace.graphs.values import How
from sgtrace.names import QualName

WIDTH = 100

LEGEND: dict[How, str] = {
    How.LOCAL: "defined in the same module",
    How.IMPORT: "through an import (re-exports included)",
    How.CLOSURE: "a function nested in an enclosing function",
    How.MRO: "a method of self or cls, found through the class hierarchy (C3 MRO)",
    How.SUPER: "super().method()",
    How.SUBCLASS: "a mixin's self.method(), found in the class that mixes it in",
    How.ANNOTATION: "the receiver's declared type (parameter, return or attribute annotation)",
    How.ATTRIBUTE_TYPE: "self.attr whose type comes from an assignment",
    How.PROPERTY: "through a @property's returned value or return annotation",
    How.FACTORY: "a class returned by a function, then instantiated",
    How.OVERRIDE: "an overrider of an abstract method (any of them may run)",
    How.ELEMENT: "a loop, comprehension or unpacking variable typed by its iterable's elements",
    How.REFERENCE: "a function or class held in a variable, container or attribute, then called",
    How.ARGUMENT: "a function passed as an argument, called by the callee; or a method of what its callers pass for an unannotated parameter",
    How.DECORATOR: "a decorator, called where the function is defined; or its wrapper, which calls the original",
    How.DISPATCH: "a callable given to an object whose __call__ calls it (a dispatcher); those registered for the argument's type when it is known",
    How.PROTOCOL: "a method Python calls without a call expression: __enter__/__exit__, __iter__/__next__ and their async forms",
    How.DATACLASS: "a dataclass's __post_init__, run by its generated __init__",
    How.EXTERNAL: "code outside the analysed source: an external node module:name",
}


@dataclass(frozen=True)
class Paths:
    """Shortens the graph's files to the folder they all share (``prefix``, may be empty)."""

    prefix: str

    @classmethod
    def of(cls, graph: CallGraph) -> Paths:
        folders = {posixpath.dirname(f) for f in _files(graph)}
        common = posixpath.commonpath(sorted(folders)) if folders else ""
        return cls(common + "/" if common else "")

    def short(self, file: str) -> str:
        return file.removeprefix(self.prefix)


def _files(graph: CallGraph) -> set[str]:
    """The source files of the graph (external nodes have none)."""
    files = {n.file for n in graph.nodes.values()} | {s.file for s in graph.sites}
    return files - {""}


def render_text(graph: CallGraph, depth: int | None = None) -> str:
    """An indented tree from each root (callees, or ``<-`` callers); a subtree already printed
    is referred to with ``(see above)``. See the module docstring for the layout."""
    writer = _TreeWriter(graph, depth, Paths.of(graph))
    prefix = writer.paths.prefix
    writer.lines.append(f"# {graph.label}" + (f"; files under {prefix}" if prefix else ""))
    if graph.shows_callees:
        writer.callees_section()
    if graph.shows_callers:
        writer.callers_section()
    counts = graph.unresolved_counts()
    total = sum(counts.values())
    detail = ", ".join(f"{k} {v}" for k, v in counts.items())
    counted = f"# {len(graph.sites)} resolved call sites; {total} unresolved"
    _wrapped(counted, f"({detail})" if total else "", "#   ", writer.lines, gap=" ")
    writer.lines += legend(graph)
    return "\n".join(writer.lines) + "\n"


def legend(graph: CallGraph) -> list[str]:
    """The footer: how to read a line, then each label of ``graph`` with its meaning."""
    used = sorted({s.how for s in graph.sites})
    if not used:
        return []
    out = []
    if graph.shows_callees:
        out.append("# N: Name  [how]  (file:line): Name, defined at file:line, is called on line N")
    if graph.shows_callers:
        out.append("# <- Name  [how]  (file:line): Name calls the function above at file:line")
    width = max(map(len, used)) + 2
    meanings = {how.value: text for how, text in LEGEND.items()}
    for how in used:
        out.append(f"#   {'[' + how + ']':<{width}}  {meanings.get(how, 'a rule of resolution')}")
    return out


def _wrapped(head: str, tail: str, under: str, lines: list[str], gap: str = "  ") -> None:
    """``head``, ``gap`` and ``tail`` on one line if it fits :data:`WIDTH`, else ``tail`` on
    the next line after ``under`` (spaces that align it, or a comment's ``#``)."""
    if not tail:
        lines.append(head)
    elif len(head) + len(gap) + len(tail) <= WIDTH:
        lines.append(head + gap + tail)
    else:
        lines += [head, under + tail]


@dataclass
class _TreeWriter:
    """The lines of one :func:`render_text` call, appended as the tree is walked."""

    graph: CallGraph
    depth: int | None
    paths: Paths
    lines: list[str] = field(default_factory=list)
    seen: set[QualName] = field(default_factory=set)

    def place(self, name: QualName) -> str:
        node = self.graph.nodes.get(name)
        if node is None or not node.file:  # outside the analysed source: its module
            return name.module
        return f"{self.paths.short(node.file)}:{node.line}"

    def callees_section(self) -> None:
        by_caller: dict[QualName, list[CallSite]] = defaultdict(list)
        for site in self.graph.sites:
            by_caller[site.caller].append(site)
        callees = {s.callee for s in self.graph.sites}
        roots = [r for r in self.graph.roots if r in by_caller or r not in callees]
        for root in roots or sorted(by_caller):
            if root in self.seen or (root not in by_caller and root in callees):
                continue
            self.lines.append(f"{root.qualname}  {self.place(root)}")
            self.callees(by_caller, root, 1)

    def callees(
        self, by_caller: dict[QualName, list[CallSite]], caller: QualName, level: int
    ) -> None:
        self.seen.add(caller)
        if self.depth is not None and level > self.depth:
            return
        grouped: dict[QualName, list[CallSite]] = defaultdict(list)
        for site in by_caller.get(caller, []):
            grouped[site.callee].append(site)
        for callee in sorted(grouped, key=lambda c: (min(s.line for s in grouped[c]), str(c))):
            sites = grouped[callee]
            where = ",".join(str(line) for line in sorted({s.line for s in sites}))
            hows = ",".join(sorted({s.how for s in sites}))
            again = " (see above)" if callee in self.seen and by_caller.get(callee) else ""
            indent = "  " * level
            head = f"{indent}{where}: {callee.qualname}  [{hows}]{again}"
            under = " " * (len(indent) + len(where) + 2)
            _wrapped(head, f"({self.place(callee)})", under, self.lines)
            if callee not in self.seen and callee in by_caller:
                self.callees(by_caller, callee, level + 1)

    def callers_section(self) -> None:
        by_callee: dict[QualName, list[CallSite]] = defaultdict(list)
        for site in self.graph.sites:
            by_callee[site.callee].append(site)
        for root in self.graph.roots:
            if root in by_callee:
                self.lines.append(f"callers of {root.qualname}  {self.place(root)}")
                self.callers(by_callee, root, 1, {root})

    def callers(
        self,
        by_callee: dict[QualName, list[CallSite]],
        callee: QualName,
        level: int,
        seen: set[QualName],
    ) -> None:
        if self.depth is not None and level > self.depth:
            return
        for site in sorted(by_callee.get(callee, []), key=lambda s: (str(s.caller), s.line)):
            indent = "  " * level
            head = f"{indent}<- {site.caller.qualname}  [{site.how}]"
            place = f"({self.paths.short(site.file)}:{site.line})"
            _wrapped(head, place, indent + "   ", self.lines)
            if site.caller not in seen:
                seen.add(site.caller)
                self.callers(by_callee, site.caller, level + 1, seen)
