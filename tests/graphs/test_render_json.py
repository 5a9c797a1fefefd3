"""``render_json`` writes, byte for byte, what networkx's node-link data and ``json.dumps`` write.

The renderer assembles the text itself (the pure-Python ``json`` encoder and the networkx graph
cost seconds on a whole package); these tests build the reference the slow way and compare
whole outputs, on a golden case and on graphs with the shapes a real one can take.
"""

from __future__ import annotations

import json

import networkx as nx
import pytest

from sgtrace.graphs.model import CallGraph, CallSite, Node, Unresolved, UnresolvedCall
from sgtrace.graphs.render import render_json
from sgtrace.names import QualName
from tests.graphs.golden import Case, all_cases


def reference_json(graph: CallGraph) -> str:
    """The node-link JSON as the renderer used to write it, through networkx."""
    data = nx.node_link_data(graph.to_networkx(), edges="edges")
    data["graph"] = {
        "source": graph.label,
        "roots": [str(r) for r in graph.roots],
        "unresolved": graph.unresolved_counts(),
    }
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def name(text: str) -> QualName:
    return QualName.parse(text)


def node(text: str, line: int = 1, kind: str = "function") -> Node:
    qual = name(text)
    return Node(qual, kind, qual.module.replace(".", "/") + ".py", line)


def site(caller: str, callee: str, line: int, how: str = "local") -> CallSite:
    return CallSite("a.py", line, name(caller), name(callee), "f()", None, how)


def graphs() -> dict[str, CallGraph]:
    """Small graphs with every shape the renderer handles."""
    names = ["a:f", "a:g", "a.b:h", "a:C.m", "a:<module>", "é:ü"]  # "a.b" sorts after "a"
    nodes = {name(n): node(n, i + 1) for i, n in enumerate(names)}
    sites = [
        site("a:f", "a:g", 3),
        site("a:f", "a:g", 2, "import"),  # one edge, two lines, two hows
        site("a.b:h", "a:f", 7),
        site("a:C.m", "ext:x", 9),  # an endpoint without a node
        site("ext:caller", "a:f", 4),  # a caller without a node
        site("é:ü", "a:g", 5),
    ]
    unresolved = [UnresolvedCall("a.py", 8, name("a:f"), "len", Unresolved.BUILTIN)]
    return {
        "empty": CallGraph({}, [], [], (), "dir:/x"),
        "nodes-only": CallGraph(dict(list(nodes.items())[:2]), [], [], (name("a:f"),), "x"),
        "mixed": CallGraph(nodes, sites, unresolved, (name("a:f"), name("a.b:h")), "sglang==9"),
    }


@pytest.mark.parametrize("shape", sorted(graphs()))
def test_render_json_equals_networkx_node_link(shape: str) -> None:
    graph = graphs()[shape]
    assert render_json(graph) == reference_json(graph)


@pytest.mark.parametrize("case", all_cases(), ids=lambda c: c.name)
def test_render_json_equals_networkx_on_golden_cases(case: Case) -> None:
    graph = case.graph()
    assert render_json(graph) == reference_json(graph)
