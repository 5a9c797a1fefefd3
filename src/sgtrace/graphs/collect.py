"""The call-site pass: a libcst visitor over the whole module, on top of the outline.

Definitions, imports and value facts come from the stdlib ``ast`` outline (``outline.py``,
``flow.py``), so that the cheap pass and this one agree by construction. libcst adds what only
it collects here: :class:`CallSiteCollector` records every call with its callee chain, line,
guarding condition and the arguments that name functions. :func:`collect_module` runs it and
assembles the :class:`ModuleSummary`. Nothing here imports or executes the code under study.
"""

from __future__ import annotations

import ast
import gc
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace

import libcst as cst

from sgtrace.graphs.exprs import code_of, raw_call
from sgtrace.graphs.lines import LineTable, table_from_positions, table_from_tree
from sgtrace.graphs.outline import outline_tree
from sgtrace.graphs.scope import Cursor
from sgtrace.graphs.summary import ModuleSummary, RawCall
from sgtrace.graphs.walk import walk_batched


class _Pass(cst.BatchableCSTVisitor):
    def __init__(self, cursor: Cursor) -> None:
        super().__init__()
        self.cursor = cursor


class CallSiteCollector(_Pass):
    """Records every call with its line and the ``if`` conditions that guard it."""

    def __init__(self, cursor: Cursor) -> None:
        super().__init__(cursor)
        self.calls: dict[str, list[RawCall]] = defaultdict(list)
        self.guards: list[list[str]] = [[]]
        self.decorator_depth = 0

    def visit_FunctionDef_body(self, node: cst.FunctionDef) -> None:
        self.guards.append([])

    def leave_FunctionDef_body(self, node: cst.FunctionDef) -> None:
        self.guards.pop()

    def visit_Lambda_body(self, node: cst.Lambda) -> None:
        self.guards.append([])  # a lambda's body runs when it is called, not where written

    def leave_Lambda_body(self, node: cst.Lambda) -> None:
        self.guards.pop()

    def visit_If_body(self, node: cst.If) -> None:
        self.guards[-1].append(code_of(node.test))

    def leave_If_body(self, node: cst.If) -> None:
        self.guards[-1].pop()

    def visit_If_orelse(self, node: cst.If) -> None:
        self.guards[-1].append(f"not ({code_of(node.test)})")

    def leave_If_orelse(self, node: cst.If) -> None:
        self.guards[-1].pop()

    def visit_While_body(self, node: cst.While) -> None:
        self.guards[-1].append(code_of(node.test))

    def leave_While_body(self, node: cst.While) -> None:
        self.guards[-1].pop()

    def visit_Decorator(self, node: cst.Decorator) -> None:
        self.decorator_depth += 1

    def leave_Decorator(self, node: cst.Decorator) -> None:
        self.decorator_depth -= 1

    def visit_Call(self, node: cst.Call) -> None:
        scopes = self.cursor.scopes
        # a decorator runs in the scope that defines the function, not inside it
        scope = scopes[-2] if self.decorator_depth and len(scopes) > 1 else scopes[-1]
        guard = " and ".join(self.guards[-1]) or None
        function = self.cursor.function
        raw = raw_call(
            node,
            self.cursor.call_line(),
            guard,
            function.qualname if function else "",
            self.cursor.child_qualname("<lambda>"),
        )
        self.calls[scope.qualname].append(raw)


PASSES = (CallSiteCollector,)


def collect_module(
    source: str, module: str, file: str, is_package: bool, validate: bool = True
) -> ModuleSummary:
    """Parse ``source`` with libcst and summarise it; a parse failure gives an empty summary
    whose ``parse_error`` says where and why. ``validate=False`` skips libcst's check of each
    node it builds (see :func:`trusting_the_parser`): for a process that only parses."""
    was_enabled = gc.isenabled()
    gc.disable()  # a parse allocates many small objects and no cycles worth collecting
    try:
        return _collect(source, module, file, is_package, validate)
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def trusting_the_parser() -> Iterator[None]:
    """libcst's per-node validation off while the block parses.

    Every libcst node checks its fields when it is built (``CSTNode.__post_init__`` calls
    ``_validate``), which guards trees built by hand; a tree built by libcst's own parser from
    source it accepted is valid by construction (libcst notes as much where it validates).
    The check is a sixth or so of a parse. It is switched off for the ``with`` block only, and
    only in the parse pool's worker processes, which do nothing else.
    """
    saved = cst.CSTNode.__post_init__
    cst.CSTNode.__post_init__ = _built_by_the_parser  # type: ignore[method-assign]
    try:
        yield
    finally:
        cst.CSTNode.__post_init__ = saved  # type: ignore[method-assign]


def _built_by_the_parser(self: cst.CSTNode) -> None:
    """``CSTNode.__post_init__`` without ``_validate``, while :func:`trusting_the_parser`."""


def _collect(
    source: str, module: str, file: str, is_package: bool, validate: bool
) -> ModuleSummary:
    try:
        with nullcontext() if validate else trusting_the_parser():
            tree = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        where = f"{file}:{exc.raw_line}:{exc.raw_column}"
        return ModuleSummary(module, file, is_package, parse_error=f"{where}: {exc.message}")
    parsed = _stdlib_parse(source)
    if parsed is None:
        return ModuleSummary(module, file, is_package, parse_error=f"{file}: not parsed by ast")
    outline, implicit = outline_tree(parsed, module, file, is_package, source.splitlines())
    calls = _run_passes(tree, table_from_tree(parsed))
    if calls is None:
        calls = _run_passes(tree, table_from_positions(tree))
    assert calls is not None
    for scope, found in implicit.items():
        calls[scope].extend(found)
    return _with_calls(outline, calls)


def _stdlib_parse(source: str, attempts: int = 20) -> ast.Module | None:
    """The stdlib tree of ``source``; a line this Python's parser rejects (syntax newer than
    it, which libcst accepted) is read as ``pass``, so the rest keeps its definitions."""
    lines = source.splitlines()
    for _ in range(attempts):
        try:
            return ast.parse("\n".join(lines))
        except (SyntaxError, ValueError) as exc:
            number = getattr(exc, "lineno", None)
            if not number or number > len(lines) or lines[number - 1].strip() == "pass":
                return None
            text = lines[number - 1]
            lines[number - 1] = text[: len(text) - len(text.lstrip())] + "pass"
    return None


def _run_passes(tree: cst.Module, table: LineTable) -> dict[str, list[RawCall]] | None:
    cursor = Cursor(table)
    calls = CallSiteCollector(cursor)
    walk_batched(tree, [calls], cursor.before_visit, cursor.after_leave)
    return calls.calls if cursor.is_aligned() else None


def _with_calls(outline: ModuleSummary, calls: dict[str, list[RawCall]]) -> ModuleSummary:
    """The outline with each scope's call sites: a full summary."""
    return replace(
        outline,
        functions={
            q: replace(f, calls=tuple(calls.get(q, ()))) for q, f in outline.functions.items()
        },
        classes={q: replace(c, calls=tuple(calls.get(q, ()))) for q, c in outline.classes.items()},
        calls=tuple(calls.get("", ())),
        is_outline=False,
    )
