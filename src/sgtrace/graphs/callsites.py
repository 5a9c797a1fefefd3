"""Call sites from the stdlib parser: with the outline, a full summary five times faster.

The libcst passes of ``collect.py`` are the reference; a libcst parse is most of their cost
(about 24 ms a file on SGLang 0.5.23), the stdlib ``ast`` parse a tenth of it. ``outline.py``
already collects every part of a :class:`ModuleSummary` but the call sites from ``ast``; this
module adds them, exactly as :class:`~sgtrace.graphs.collect.CallSiteCollector` records them:

* each call in the scope libcst's cursor stands in (a decorator's calls in the scope that
  defines the decorated function or class; a function's defaults and annotations in the
  function; lambdas and comprehensions in their enclosing scope), in libcst's visiting order
  (pre-order, which sorted ``(line, column, -end)`` positions reproduce, see ``lines.py``);
* the guard: the ``if``/``while`` conditions around it in the same function body, as source
  text on one line, parentheses of the condition included (libcst keeps them on the node);
* the callee's root and attributes, as ``exprs.callee_chain`` splits them.

``tests/graphs/test_fast_summary.py`` compares both collectors on real code, and
:data:`PARITY_SCHEMA` turns this path off by itself when the summary classes change shape.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import replace

from sgtrace.graphs.summary import ModuleSummary, RawCall, RootKind

# The shape of the summary classes (``Codec.schema(ModuleSummary)``) this module and the
# outline were checked against; on any other shape, full summaries come from libcst only.
PARITY_SCHEMA = "a0d4d6351e378744"

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
Key = tuple[int, int, int, int]


def with_calls(outline: ModuleSummary, source: str, tree: ast.Module) -> ModuleSummary:
    """``outline`` (from ``outline.py``) completed with the call sites of ``tree``."""
    finder = _CallFinder(source)
    finder.block(tree.body, "", "module", ())
    calls = {
        scope: tuple(call for _, call in sorted(found, key=lambda item: item[0]))
        for scope, found in finder.calls.items()
    }
    return replace(
        outline,
        is_outline=False,
        calls=calls.get("", ()),
        functions={q: replace(f, calls=calls.get(q, ())) for q, f in outline.functions.items()},
        classes={q: replace(c, calls=calls.get(q, ())) for q, c in outline.classes.items()},
    )


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _CallFinder:
    """One recursive pass over a module: scopes, guards and calls, as libcst's cursor has them."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.starts = [0]  # offset of each line's first character
        for line in source.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))
        self.calls: dict[str, list[tuple[Key, RawCall]]] = defaultdict(list)

    def block(self, body: list[ast.stmt], scope: str, kind: str, guards: tuple[str, ...]) -> None:
        for stmt in body:
            self.node(stmt, scope, kind, guards)

    def node(self, node: ast.AST, scope: str, kind: str, guards: tuple[str, ...]) -> None:
        """Visit ``node`` standing in ``scope`` (of ``kind``) under ``guards``."""
        cls = type(node)
        if cls is ast.Call:
            self.call(node, scope, guards)  # type: ignore[arg-type]
        elif cls in _FUNCS or cls is ast.ClassDef:
            self.definition(node, scope, kind, guards)  # type: ignore[arg-type]
            return
        elif cls is ast.If or cls is ast.While:
            keyword = self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
            while self.source[keyword].isalpha():  # if, elif, while
                keyword += 1
            test = self.code(node.test, keyword)  # type: ignore[attr-defined]
            self.node(node.test, scope, kind, guards)  # type: ignore[attr-defined]
            self.block(node.body, scope, kind, (*guards, test))  # type: ignore[attr-defined]
            orelse = (*guards, f"not ({test})") if cls is ast.If else guards
            self.block(node.orelse, scope, kind, orelse)  # type: ignore[attr-defined]
            return
        for child in ast.iter_child_nodes(node):
            self.node(child, scope, kind, guards)

    def definition(
        self,
        node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef,
        scope: str,
        kind: str,
        guards: tuple[str, ...],
    ) -> None:
        for decorator in node.decorator_list:  # they run where the definition stands
            self.node(decorator, scope, kind, guards)
        if kind == "module":
            inner = node.name
        elif kind == "class":
            inner = f"{scope}.{node.name}"
        else:
            inner = f"{scope}.<locals>.{node.name}"
        if isinstance(node, ast.ClassDef):
            for expr in (*node.bases, *node.keywords):
                self.node(expr, inner, "class", guards)
            self.block(node.body, inner, "class", guards)
            return
        self.node(node.args, inner, "function", guards)
        if node.returns is not None:
            self.node(node.returns, inner, "function", guards)
        self.block(node.body, inner, "function", ())

    def call(self, node: ast.Call, scope: str, guards: tuple[str, ...]) -> None:
        attrs: list[str] = []
        func = node.func
        while isinstance(func, ast.Attribute):
            attrs.append(func.attr)
            func = func.value
        attrs.reverse()
        root_kind, root = RootKind.DYNAMIC, ""
        if isinstance(func, ast.Name):
            root_kind, root = RootKind.NAME, func.id
        elif isinstance(func, ast.Call) and (inner := _dotted(func.func)) is not None:
            root_kind, root = (RootKind.SUPER, "") if inner == "super" else (RootKind.CALL, inner)
        if root_kind is RootKind.DYNAMIC:
            root = self.code(func, self.offset(node.lineno, node.col_offset))[:80]
        key = (node.lineno, node.col_offset, -(node.end_lineno or 0), -(node.end_col_offset or 0))
        guard = " and ".join(guards) or None
        self.calls[scope].append((key, RawCall(node.lineno, root_kind, root, tuple(attrs), guard)))

    def offset(self, line: int, utf8_column: int) -> int:
        """The offset in the source of ``ast``'s (line, UTF-8 byte column)."""
        return self.starts[line - 1] + _column(self.source, self.starts, line, utf8_column)

    def code(self, node: ast.expr, anchor: int) -> str:
        """The source of ``node`` on one line, with the parentheses around it (libcst keeps
        them on the node: ``if (a):`` has the test ``(a)``), comments inside them included.
        ``anchor`` is where the text before the node that may hold its opening parentheses
        starts: after the ``if``/``while`` keyword, or the start of the call."""
        text = self.source
        start = self.offset(node.lineno, node.col_offset)
        end = self.offset(node.end_lineno or node.lineno, node.end_col_offset or 0)
        opened = _marks(text, anchor, start, "(")
        closed = _marks(text, end, len(text), ")", limit=len(opened))
        wraps = min(len(opened), len(closed))
        if wraps:
            start, end = opened[-wraps], closed[wraps - 1] + 1
        return " ".join(text[start:end].split())


def _marks(text: str, begin: int, end: int, mark: str, limit: int | None = None) -> list[int]:
    """Offsets of ``mark`` in ``text[begin:end]`` among blanks and comments, until anything
    else (or ``limit`` marks)."""
    found: list[int] = []
    at = begin
    while at < end and (limit is None or len(found) < limit):
        char = text[at]
        if char == mark:
            found.append(at)
        elif char == "#":
            at = text.find("\n", at)
            if at < 0:
                break
            continue
        elif char not in " \t\r\n\\\x0c":
            break
        at += 1
    return found


def _column(text: str, starts: list[int], line: int, utf8_column: int) -> int:
    """The character column of ``ast``'s UTF-8 byte column on ``line``."""
    begin = starts[line - 1]
    segment = text[begin : begin + utf8_column]
    if segment.isascii():
        return utf8_column
    return len(text[begin:].encode("utf-8")[:utf8_column].decode("utf-8", errors="replace"))
