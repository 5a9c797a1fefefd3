"""The call graph: a pure model over networkx, no I/O.

Nodes are :class:`~sgtrace.names.QualName` (``module:Qual.name``) with ``kind``, ``file`` and
``line``; an edge caller -> callee carries the sorted call-site ``lines`` in the caller's file
and ``how`` (the resolution rules, e.g. ``mro`` or ``property``). Calls that cannot be resolved
are kept as :class:`UnresolvedCall` with a reason, never guessed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, NamedTuple

from sgtrace.names import QualName

if TYPE_CHECKING:
    import networkx as nx


class Unresolved(str, Enum):
    """Why a call has no edge."""

    BUILTIN = "builtin"  # len(), isinstance(), ...
    EXTERNAL = "external"  # resolves outside the analysed source (torch, stdlib)
    UNKNOWN_NAME = "unknown-name"  # a name bound nowhere the analyzer can see
    UNKNOWN_TYPE = "unknown-type"  # the receiver's type is not known
    NO_MEMBER = "no-member"  # the receiver's known types have no such attribute
    DYNAMIC = "dynamic"  # subscripts, lambdas, calls of call results without known type


@dataclass(frozen=True, order=True)
class Node:
    name: QualName
    kind: str
    file: str
    line: int


@dataclass(frozen=True, order=True)
class CallSite:
    """A call that resolves to ``callee``."""

    file: str
    line: int
    caller: QualName
    callee: QualName
    text: str
    guard: str | None
    how: str


@dataclass(frozen=True, order=True)
class UnresolvedCall:
    file: str
    line: int
    caller: QualName
    spelled: str
    reason: Unresolved
    detail: str = ""


class Edge(NamedTuple):
    """All the calls from ``caller`` to ``callee``: their sorted ``lines`` in the caller's file
    and the rules that resolved them (``how``, comma-joined, sorted). A named tuple: a graph
    of a whole package has tens of thousands, built on every rendering."""

    caller: QualName
    callee: QualName
    lines: list[int]
    how: str


EXTERNAL = "external"  # the kind of a node outside the analysed source, the how of edges to it


def external_nodes(sites: Iterable[CallSite]) -> dict[QualName, Node]:
    """The nodes outside the analysed source that ``sites`` call (``torch.cuda:synchronize``):
    kind ``external``, no file."""
    return {s.callee: Node(s.callee, EXTERNAL, "", 0) for s in sites if s.how == EXTERNAL}


def name_key(name: QualName) -> tuple[str, str]:
    """A sort key that orders names as :class:`QualName` does, compared in C."""
    return name.module, name.qualname


# Sort keys of call sites and unresolved calls: their fields in order, names as name_key.
SiteKey = tuple[str, int, str, str, str, str, str, bool, str, str]
UnresolvedKey = tuple[str, int, str, str, str, str, str]


def site_order(site: CallSite) -> SiteKey:
    """A sort key that orders call sites as :class:`CallSite` does, compared in C (a graph
    of a whole package sorts tens of thousands)."""
    guard = site.guard
    return (
        site.file,
        site.line,
        *name_key(site.caller),
        *name_key(site.callee),
        site.text,
        guard is not None,
        guard or "",
        site.how,
    )


def unresolved_order(call: UnresolvedCall) -> UnresolvedKey:
    """A sort key that orders unresolved calls as :class:`UnresolvedCall` does, compared in C."""
    return (
        call.file,
        call.line,
        *name_key(call.caller),
        call.spelled,
        call.reason.value,
        call.detail,
    )


@dataclass
class CallGraph:
    """Nodes, resolved call sites and unresolved calls; ``to_networkx`` builds the graph."""

    nodes: dict[QualName, Node]
    sites: list[CallSite]
    unresolved: list[UnresolvedCall]
    roots: tuple[QualName, ...] = ()
    label: str = ""
    shows_callers: bool = False  # built with --direction callers or both
    shows_callees: bool = True  # built with --direction callees or both

    def to_networkx(self) -> nx.DiGraph[str]:
        """The graph over the names' ``str``; node and edge attributes as the module says."""
        import networkx as nx  # imported on use: it costs a quarter second at start-up

        graph: nx.DiGraph[str] = nx.DiGraph()
        for name in sorted(self.nodes):
            node = self.nodes[name]
            graph.add_node(str(name), kind=node.kind, file=node.file, line=node.line)
        for edge in self.edges():
            graph.add_edge(str(edge.caller), str(edge.callee), lines=edge.lines, how=edge.how)
        return graph

    def edges(self) -> list[Edge]:
        """One edge per caller -> callee pair, sorted by (caller, callee)."""
        found: dict[tuple[str, ...], tuple[QualName, QualName, set[int], set[str]]] = {}
        for site in self.sites:
            caller, callee = site.caller, site.callee
            key = (caller.module, caller.qualname, callee.module, callee.qualname)
            entry = found.get(key)
            if entry is None:
                entry = found[key] = (caller, callee, set(), set())
            entry[2].add(site.line)
            entry[3].add(site.how)
        return [
            Edge(caller, callee, sorted(lines), ",".join(sorted(hows)))
            for _, (caller, callee, lines, hows) in sorted(found.items())
        ]

    def callees_of(self, name: QualName) -> list[CallSite]:
        return sorted(s for s in self.sites if s.caller == name)

    def callers_of(self, name: QualName) -> list[CallSite]:
        return sorted(s for s in self.sites if s.callee == name)

    def unresolved_counts(self) -> dict[str, int]:
        counts = Counter(u.reason.value for u in self.unresolved)
        return dict(sorted(counts.items()))
