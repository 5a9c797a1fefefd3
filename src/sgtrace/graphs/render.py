"""Renderers: a call graph to text, JSON (networkx node-link), DOT (pydot) or SVG (Graphviz).

Every renderer returns a string and sorts what it prints, so output is deterministic and can be
compared with golden files. Only the SVG renderer runs a program (Graphviz's ``dot``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import defaultdict
from collections.abc import Mapping
from json.encoder import encode_basestring_ascii as quote
from typing import TYPE_CHECKING, cast

from sgtrace.errors import GraphvizMissingError, SgtraceError
from sgtrace.graphs.model import CallGraph, Edge, Node, name_key
from sgtrace.graphs.tree import render_text
from sgtrace.names import QualName

if TYPE_CHECKING:
    import pydot

__all__ = ["build_dot", "render_dot", "render_json", "render_svg", "render_text"]


def render_json(graph: CallGraph) -> str:
    """networkx node-link data (``node_link_data(G, edges="edges")``) plus unresolved counts,
    byte for byte as ``json.dumps(data, indent=2, sort_keys=True)`` writes it (see below),
    without building the networkx graph, whose import alone costs more than a warm run."""
    meta = {
        "source": graph.label,
        "roots": [str(r) for r in graph.roots],
        "unresolved": graph.unresolved_counts(),
    }
    return node_link_json(graph, meta)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def build_dot(graph: CallGraph) -> pydot.Dot:
    """A pydot graph: one cluster per file, nested clusters per class."""
    import pydot

    dot = pydot.Dot(
        _quote("callgraph"),
        graph_type="digraph",
        rankdir="LR",
        fontname="Helvetica",
        label=_quote(graph.label),
        labelloc="t",
    )
    dot.set_node_defaults(shape="box", fontname="Helvetica", fontsize="10", style="rounded")
    dot.set_edge_defaults(fontname="Helvetica", fontsize="8")
    files: dict[str, list[Node]] = defaultdict(list)
    for name in sorted(graph.nodes):
        files[graph.nodes[name].file].append(graph.nodes[name])
    for number, file in enumerate(sorted(files)):
        cluster = pydot.Cluster(
            f"file{number}", label=_quote(file), style="dashed", fontname="Helvetica"
        )
        classes: dict[str, pydot.Cluster] = {}
        for node in files[file]:
            owner = node.name.qualname.split(".<locals>.")[0].rpartition(".")[0]
            target = cluster
            if owner:
                if owner not in classes:
                    classes[owner] = pydot.Cluster(
                        f"file{number}_{len(classes)}", label=_quote(owner), style="rounded"
                    )
                target = classes[owner]
            attrs = {"label": _quote(f"{node.name.qualname}\n:{node.line}")}
            if node.name in graph.roots:
                attrs["penwidth"] = "2"
            # obj_dict (pydot's default) named, so that **attrs is not taken to fill it
            target.add_node(pydot.Node(_quote(str(node.name)), obj_dict=None, **attrs))
        for owner in sorted(classes):
            _add_cluster(cluster, classes[owner])
        _add_cluster(dot, cluster)
    nxg = graph.to_networkx()
    for caller, callee, data in sorted(nxg.edges(data=True)):
        label = f"{data['how']} @{','.join(map(str, data['lines']))}"
        dot.add_edge(pydot.Edge(_quote(caller), _quote(callee), label=_quote(label)))
    return dot


def _add_cluster(parent: pydot.Graph, cluster: pydot.Cluster) -> None:
    """``parent.add_subgraph(cluster)``. pydot annotates the argument as ``Subgraph``, a class
    ``Cluster`` does not derive from, but ``add_subgraph`` takes either (it checks for both):
    the cast is for pydot's annotation only."""
    parent.add_subgraph(cast("pydot.Subgraph", cluster))


def render_dot(graph: CallGraph) -> str:
    return build_dot(graph).to_string()


def render_svg(graph: CallGraph) -> str:
    """SVG through Graphviz's ``dot``; a clear error when Graphviz is missing."""
    exe = shutil.which("dot")
    if exe is None:
        raise GraphvizMissingError(
            "SVG output needs Graphviz's dot program, which is not on PATH; install it "
            "(Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz) or use "
            "--format dot"
        )
    try:
        proc = subprocess.run(
            [exe, "-Tsvg"], input=render_dot(graph), capture_output=True, text=True, check=False
        )
    except OSError as exc:
        raise GraphvizMissingError(
            f"Graphviz's dot ({exe}) could not be started ({exc.strerror}); check it runs "
            "(dot -V), or use --format dot and draw the graph elsewhere"
        ) from exc
    if proc.returncode != 0:
        lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
        first = lines[0][:200] if lines else "no message"
        raise SgtraceError(
            f"Graphviz's dot ({exe}) failed with exit code {proc.returncode}: {first}; check "
            "that `echo 'digraph{a->b}' | dot -Tsvg` works, or use --format dot and draw the "
            "graph elsewhere"
        )
    return proc.stdout


# -- node-link JSON ---------------------------------------------------------------------------
# ``json.dumps(..., indent=2)`` runs the pure-Python encoder, and building the networkx graph
# first costs as much again: seconds on a graph of a whole package. Nodes and edges have a
# fixed shape, so their text is assembled from the C string encoder, in the order and layout
# ``json.dumps(nx.node_link_data(G, edges="edges"), indent=2, sort_keys=True)`` produces: nodes
# in insertion order (sorted names, then edge endpoints that are not nodes, as ``add_edge``
# would insert them), edges grouped by caller in node order.


def node_link_json(graph: CallGraph, meta: Mapping[str, object]) -> str:
    """The node-link JSON of ``graph``, with ``meta`` as its ``graph`` attributes."""
    order = sorted(graph.nodes, key=name_key)
    known = {name_key(name) for name in order}
    by_caller: dict[tuple[str, str], list[Edge]] = {}
    for edge in graph.edges():
        for end in (edge.caller, edge.callee):
            if name_key(end) not in known:
                known.add(name_key(end))
                order.append(end)
        by_caller.setdefault(name_key(edge.caller), []).append(edge)
    edges = [_edge(e) for name in order for e in by_caller.get(name_key(name), ())]
    nodes = [_node(graph, name) for name in order]
    meta_text = json.dumps(meta, indent=2, sort_keys=True).replace("\n", "\n  ")
    return (
        '{\n  "directed": true,\n  "edges": '
        + _array(edges)
        + ',\n  "graph": '
        + meta_text
        + ',\n  "multigraph": false,\n  "nodes": '
        + _array(nodes)
        + "\n}\n"
    )


def _array(items: list[str]) -> str:
    return "[\n" + ",\n".join(items) + "\n  ]" if items else "[]"


def _node(graph: CallGraph, name: QualName) -> str:
    node = graph.nodes.get(name)
    if node is None:  # an edge's endpoint without a node: networkx gives it no attributes
        return f'    {{\n      "id": {quote(str(name))}\n    }}'
    return (
        f'    {{\n      "file": {quote(node.file)},\n      "id": {quote(str(name))},\n'
        f'      "kind": {quote(node.kind)},\n      "line": {int(node.line)}\n    }}'
    )


def _edge(edge: Edge) -> str:
    lines = (
        "[\n" + ",\n".join(f"        {int(n)}" for n in edge.lines) + "\n      ]"
        if edge.lines
        else "[]"
    )
    return (
        f'    {{\n      "how": {quote(edge.how)},\n      "lines": {lines},\n'
        f'      "source": {quote(str(edge.caller))},\n'
        f'      "target": {quote(str(edge.callee))}\n    }}'
    )
