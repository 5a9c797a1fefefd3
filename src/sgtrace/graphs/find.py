"""``sgtrace find``: definitions of a name and every call site that resolves to them.

NAME is a bare name (``process_batch_result_decode``), ``Class.method`` or ``module:qualname``.
Candidate files are found textually (they mention the last part of the name); only those are
parsed, and a call site counts only when resolution links it to a definition found.
"""

from __future__ import annotations

from dataclasses import dataclass

from sgtrace.errors import UnknownNameError
from sgtrace.graphs.build import Project, find_callers
from sgtrace.graphs.model import CallSite
from sgtrace.names import QualName


@dataclass(frozen=True, order=True)
class Definition:
    file: str
    line: int
    name: QualName
    kind: str


@dataclass(frozen=True)
class FindResult:
    definitions: tuple[Definition, ...]
    call_sites: tuple[CallSite, ...]

    def grouped_sites(self) -> tuple[SiteTargets, ...]:
        """The call sites once each, with every definition each may reach (a call of an
        abstract method reaches its overriders too), in the order of :attr:`call_sites`."""
        groups: dict[tuple[str, int, QualName, str, str | None], list[Target]] = {}
        for site in self.call_sites:
            key = (site.file, site.line, site.caller, site.text, site.guard)
            groups.setdefault(key, []).append(Target(site.callee, site.how))
        return tuple(SiteTargets(*key, tuple(targets)) for key, targets in groups.items())


@dataclass(frozen=True)
class Target:
    """A definition that a call site may reach, and the rule that linked them."""

    callee: QualName
    how: str


@dataclass(frozen=True)
class SiteTargets:
    """One call site and every definition it may reach."""

    file: str
    line: int
    caller: QualName
    text: str
    guard: str | None
    targets: tuple[Target, ...]


def _matches(qualname: str, wanted: str) -> bool:
    return qualname == wanted or qualname.endswith("." + wanted)


def find_definitions(project: Project, name: str) -> list[Definition]:
    """Definitions whose qualified name is ``name`` or ends with ``.name``."""
    if ":" in name:
        wanted = QualName.parse(name)
        modules = [wanted.module]
    else:
        wanted = None
        modules = project.index.mentioning(name.rsplit(".", 1)[-1])
    project.index.load(modules, full=False)
    found = []
    for module in modules:
        summary = project.index.summary(module)
        if summary is None:
            continue
        for qual in (*summary.functions, *summary.classes):
            hit = qual == wanted.qualname if wanted else _matches(qual, name)
            if hit and (node := project.node(QualName(module, qual))) is not None:
                found.append(Definition(node.file, node.line, node.name, node.kind))
    return sorted(found)


def find_name(project: Project, name: str) -> FindResult:
    """Definitions of ``name`` and the call sites resolving to them; raises
    :class:`UnknownNameError` with close matches when nothing is defined under that name."""
    definitions = find_definitions(project, name)
    if not definitions:
        raise UnknownNameError(name, _candidates(project, name), f" in {project.tree.label}")
    sites: set[CallSite] = set()
    for definition in definitions:
        target = definition.name
        if definition.kind == "class":
            target = target.child("__init__")
            sites.update(find_callers(project, definition.name))
        sites.update(find_callers(project, target))
    return FindResult(tuple(definitions), tuple(sorted(sites)))


def _candidates(project: Project, name: str) -> list[str]:
    loaded = {q for m in project.index.loaded.values() for q in (*m.functions, *m.classes)}
    return sorted(loaded | project.index.defined_names)
