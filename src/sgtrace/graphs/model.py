"""The call graph: a pure model over networkx, no I/O.

Nodes are :class:`~sgtrace.names.QualName` (``module:Qual.name``) with ``kind``, ``file`` and
``line``; an edge caller -> callee carries the sorted call-site ``lines`` in the caller's file
and ``how`` (the resolution rules, e.g. ``mro`` or ``property``). Calls that cannot be resolved
are kept as :class:`UnresolvedCall` with a reason, never guessed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

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

    def to_networkx(self) -> nx.DiGraph:
        import networkx as nx  # imported on use: it costs a quarter second at start-up

        graph = nx.DiGraph()
        for name in sorted(self.nodes):
            node = self.nodes[name]
            graph.add_node(str(name), kind=node.kind, file=node.file, line=node.line)
        edges: dict[tuple[QualName, QualName], tuple[set[int], set[str]]] = {}
        for site in self.sites:
            lines, hows = edges.setdefault((site.caller, site.callee), (set(), set()))
            lines.add(site.line)
            hows.add(site.how)
        for (caller, callee), (lines, hows) in sorted(edges.items()):
            graph.add_edge(
                str(caller), str(callee), lines=sorted(lines), how=",".join(sorted(hows))
            )
        return graph

    def callees_of(self, name: QualName) -> list[CallSite]:
        return sorted(s for s in self.sites if s.caller == name)

    def callers_of(self, name: QualName) -> list[CallSite]:
        return sorted(s for s in self.sites if s.callee == name)

    def unresolved_counts(self) -> dict[str, int]:
        counts = Counter(u.reason.value for u in self.unresolved)
        return dict(sorted(counts.items()))
