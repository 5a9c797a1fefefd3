"""Assertions that speak the call graph's language and show input, expected, actual on failure.

>>> # assert_edges(graph, {("app.main:run", "app.util:helper", "import")},
>>> #              absent={("app.main:run", "app.other:assist")}, input_text=case.input_text())
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pytest

from sgtrace.graphs.model import CallGraph

# ("caller", "callee") or ("caller", "callee", "how"), names written module:Qual.name
Edge = tuple[str, ...]


@dataclass(frozen=True)
class Expect:
    """The edges a case's rule must produce, and those its negative twin must not."""

    present: frozenset[Edge] = frozenset()
    absent: frozenset[Edge] = frozenset()


def expect(present: set[Edge] = frozenset(), absent: set[Edge] = frozenset()) -> Expect:
    return Expect(frozenset(present), frozenset(absent))


def edge_hows(graph: CallGraph) -> dict[tuple[str, str], set[str]]:
    """``(caller, callee) -> {how, ...}`` for every resolved call site of ``graph``."""
    found: dict[tuple[str, str], set[str]] = {}
    for site in graph.sites:
        found.setdefault((str(site.caller), str(site.callee)), set()).add(site.how)
    return found


def edge_lines(graph: CallGraph) -> dict[tuple[str, str], set[int]]:
    """``(caller, callee) -> {line, ...}``: the call-site lines of each edge."""
    found: dict[tuple[str, str], set[int]] = {}
    for site in graph.sites:
        found.setdefault((str(site.caller), str(site.callee)), set()).add(site.line)
    return found


def format_edges(graph: CallGraph, callers: Iterable[str] | None = None) -> str:
    """The graph's edges, one per line (``caller -> callee [how] @lines``), optionally only
    those leaving ``callers``."""
    wanted = set(callers) if callers is not None else None
    lines = edge_lines(graph)
    out = []
    for (caller, callee), hows in sorted(edge_hows(graph).items()):
        if wanted is None or caller in wanted:
            at = ",".join(str(n) for n in sorted(lines[caller, callee]))
            out.append(f"  {caller} -> {callee} [{','.join(sorted(hows))}] @{at}")
    return "\n".join(out) or "  (none)"


def _has(edges: dict[tuple[str, str], set[str]], edge: Edge) -> bool:
    hows = edges.get((edge[0], edge[1]))
    if hows is None:
        return False
    return len(edge) < 3 or edge[2] in hows


def assert_edges(
    graph: CallGraph,
    present: Iterable[Edge],
    absent: Iterable[Edge] = (),
    input_text: str = "",
) -> None:
    """Every edge of ``present`` is in ``graph`` (with that ``how`` when a third item is given)
    and no edge of ``absent`` is. On failure, print the input, what was expected and the
    graph's actual edges out of the callers involved."""
    present, absent = sorted(set(present)), sorted(set(absent))
    edges = edge_hows(graph)
    missing = [e for e in present if not _has(edges, e)]
    unwanted = [e for e in absent if _has(edges, e)]
    if not missing and not unwanted:
        return
    callers = {e[0] for e in (*present, *absent)}
    message = ["call graph edges differ from what was expected"]
    if input_text:
        message += ["input:", input_text]
    message += ["expected edges:", *(f"  {' -> '.join(e[:2])}{_how(e)}" for e in present)]
    message += ["expected absent:", *(f"  {' -> '.join(e[:2])}{_how(e)}" for e in absent)]
    message += ["actual edges from those callers:", format_edges(graph, callers)]
    message += ["missing:", *(f"  {' -> '.join(e[:2])}{_how(e)}" for e in missing)]
    message += ["unexpected:", *(f"  {' -> '.join(e[:2])}{_how(e)}" for e in unwanted)]
    pytest.fail("\n".join(message), pytrace=False)


def _how(edge: Edge) -> str:
    return f" [{edge[2]}]" if len(edge) > 2 else ""


def unresolved_rows(graph: CallGraph) -> list[tuple[int, str, str, str]]:
    """``(line, caller, spelled, reason)`` for each unresolved call, sorted."""
    return sorted((u.line, str(u.caller), u.spelled, u.reason.value) for u in graph.unresolved)


def assert_unresolved(
    graph: CallGraph, expected: Iterable[tuple[int, str, str, str]], input_text: str = ""
) -> None:
    """The graph's unresolved calls are exactly ``expected`` ((line, caller, spelled, reason))."""
    want, got = sorted(expected), unresolved_rows(graph)
    if want == got:
        return
    message = ["unresolved calls differ from what was expected"]
    if input_text:
        message += ["input:", input_text]
    message += ["expected:", *(f"  {row}" for row in want)]
    message += ["actual:", *(f"  {row}" for row in got)]
    pytest.fail("\n".join(message), pytrace=False)
