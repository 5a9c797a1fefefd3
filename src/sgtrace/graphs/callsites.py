"""Call sites from the stdlib parser: with the outline, a full summary five times faster.

The libcst pass of ``collect.py`` is the reference; a libcst parse is most of its cost
(about 24 ms a file on SGLang 0.5.23), the stdlib ``ast`` parse a tenth of it. Both start from
the same ``ast`` outline (``outline.py``: definitions, imports, and the value facts of
``flow.py``), so only the call sites differ in how they are found; :func:`full_summary` adds
them from ``ast``, exactly as :class:`~sgtrace.graphs.collect.CallSiteCollector` records them:

* each call in the scope libcst's cursor stands in (a decorator's calls in the scope that
  defines the decorated function or class; a function's defaults and annotations in the
  function; a lambda's in the lambda, ``f.<locals>.<lambda>``; comprehensions in their
  enclosing scope), in libcst's visiting order (pre-order, which sorted
  ``(line, column, -end)`` positions reproduce, see ``lines.py``);
* the guard: the ``if``/``while`` conditions around it in the same function or lambda body,
  as source text on one line, parentheses of the condition included (libcst keeps them on
  the node);
* the callee's root and attributes, as ``exprs.callee_chain`` splits them, and the arguments
  that may name functions, as ``exprs.raw_call`` keeps them (a decorator's arguments read in
  the decorated function, as libcst's cursor has it);
* then, per scope, the calls that ``with``, ``for`` and bare decorators make without a call
  expression (``flow.py``), after the written ones.

``tests/graphs/test_fast_summary.py`` compares both collectors on real code, and
:data:`PARITY_SCHEMA` turns this path off by itself when the summary classes change shape.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace

from sgtrace.graphs.outline import outline_tree
from sgtrace.graphs.summary import ModuleSummary, RawCall, RootKind, ValueExpr, ValueKind

# The shape of the summary classes (``Codec.schema(ModuleSummary)``) this module and the
# outline were checked against; on any other shape, full summaries come from libcst only.
PARITY_SCHEMA = "816ba05812e96bd9"

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
Key = tuple[int, int, int, int]


def full_summary(
    source: str, tree: ast.Module, module: str, file: str, is_package: bool
) -> ModuleSummary:
    """The full summary of a module parsed by ``ast``: the outline (definitions and value
    facts, ``outline.py``), its call sites, then the calls statements make without a call
    expression (``with``, ``for``, decorators), as ``collect.collect_module`` assembles them."""
    outline, implicit = outline_tree(tree, module, file, is_package, source.splitlines())
    return with_calls(outline, source, tree, implicit)


def with_calls(
    outline: ModuleSummary,
    source: str,
    tree: ast.Module,
    implicit: Mapping[str, Sequence[RawCall]] | None = None,
) -> ModuleSummary:
    """``outline`` (from ``outline.py``) completed with the call sites of ``tree``, each
    scope's ``implicit`` calls after them."""
    finder = _CallFinder(source)
    finder.block(tree.body, ())
    calls = {
        scope: [call for _, call in sorted(found, key=lambda item: item[0])]
        for scope, found in finder.calls.items()
    }
    for scope, found in (implicit or {}).items():
        calls.setdefault(scope, []).extend(found)
    return replace(
        outline,
        is_outline=False,
        calls=tuple(calls.get("", ())),
        functions={
            q: replace(f, calls=tuple(calls.get(q, ()))) for q, f in outline.functions.items()
        },
        classes={q: replace(c, calls=tuple(calls.get(q, ()))) for q, c in outline.classes.items()},
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


def _reference(node: ast.expr, scope: str, lambda_name: str) -> ValueExpr | None:
    """``exprs.reference`` on the ``ast`` node: an argument that may name functions or
    classes or whose type the callee may learn (a name, a ``self`` attribute, a lambda,
    ``partial(f, ...)``, the call of a dotted name, an item of a table, a literal container of
    them), else ``None``."""
    if isinstance(node, ast.Starred):  # libcst keeps the star apart from the element's value
        node = node.value
    if isinstance(node, ast.Lambda):
        return ValueExpr(ValueKind.LAMBDA, lambda_name, scope)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = [_reference(e, scope, lambda_name) for e in node.elts]
        if not any(items):
            return None
        kind = "tuple" if isinstance(node, ast.Tuple) else "list"
        empty = ValueExpr(ValueKind.CONTAINER, "list", scope)
        return ValueExpr(ValueKind.CONTAINER, kind, scope, tuple(i or empty for i in items))
    if isinstance(node, ast.Subscript):
        held = _reference(node.value, scope, lambda_name)
        return ValueExpr(ValueKind.SUBSCRIPT, "", scope, (held,)) if held else None
    if isinstance(node, ast.Call):
        name = _dotted(node.func)
        if name is None:
            return None
        if not name.endswith("partial"):  # its result: a type for the callee's parameter
            return ValueExpr(ValueKind.CALL, name, scope)
        first = _first_argument(node)
        if first is None:
            return None
        inner = _reference(first, scope, lambda_name)
        return ValueExpr(ValueKind.CALL, name, scope, (inner,)) if inner else None
    name = _dotted(node)
    if name is None or name in ("None", "True", "False"):
        return None
    if name.startswith("self.") and name.count(".") == 1:
        return ValueExpr(ValueKind.SELF_ATTR, name[5:], scope)
    return ValueExpr(ValueKind.NAME, name, scope)


def _first_argument(node: ast.Call) -> ast.expr | None:
    """The value of a call's first argument as written, positional or keyword."""
    found = [*node.args, *(k.value for k in node.keywords)]
    if not found:
        return None
    if node.keywords and node.args:
        keyword = node.keywords[0]
        first = node.args[0]
        if (keyword.lineno, keyword.col_offset) < (first.lineno, first.col_offset):
            return keyword.value
    return found[0]


def _arguments(node: ast.Call, scope: str, lambda_name: str) -> tuple[tuple[str, ValueExpr], ...]:
    """``exprs.raw_call``'s arguments: (position or keyword, value) for each argument without a
    star that may name functions, in the order written (positions count starred ones)."""
    found = []
    for position, arg in enumerate(node.args):
        if not isinstance(arg, ast.Starred):
            value = _reference(arg, scope, lambda_name)
            if value is not None:
                found.append((str(position), value))
    for keyword in node.keywords:
        if keyword.arg is not None:
            value = _reference(keyword.value, scope, lambda_name)
            if value is not None:
                found.append((keyword.arg, value))
    return tuple(found)


class _CallFinder:
    """One recursive pass over a module: scopes, guards and calls, as libcst's cursor has them.

    ``scopes`` is the cursor's stack of ``(kind, qualname)``: a definition is on it while its
    decorators are visited (which record their calls one scope out), a lambda while its
    parameters and body are."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.starts = [0]  # offset of each line's first character
        for line in source.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))
        self.calls: dict[str, list[tuple[Key, RawCall]]] = defaultdict(list)
        self.scopes: list[tuple[str, str]] = [("module", "")]
        self.decorating = 0

    def block(self, body: list[ast.stmt], guards: tuple[str, ...]) -> None:
        for stmt in body:
            self.node(stmt, guards)

    def node(self, node: ast.AST, guards: tuple[str, ...]) -> None:
        """Visit ``node`` under ``guards``, in the scope on top of :attr:`scopes`."""
        cls = type(node)
        if cls is ast.Call:
            self.call(node, guards)  # type: ignore[arg-type]
        elif cls in _FUNCS or cls is ast.ClassDef:
            self.definition(node, guards)  # type: ignore[arg-type]
            return
        elif cls is ast.Lambda:
            self.scopes.append(("function", self.child("<lambda>")))
            self.node(node.args, guards)  # type: ignore[attr-defined]
            self.node(node.body, ())  # type: ignore[attr-defined]
            self.scopes.pop()
            return
        elif cls is ast.If or cls is ast.While:
            keyword = self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
            while self.source[keyword].isalpha():  # if, elif, while
                keyword += 1
            test = self.code(node.test, keyword)  # type: ignore[attr-defined]
            self.node(node.test, guards)  # type: ignore[attr-defined]
            self.block(node.body, (*guards, test))  # type: ignore[attr-defined]
            orelse = (*guards, f"not ({test})") if cls is ast.If else guards
            self.block(node.orelse, orelse)  # type: ignore[attr-defined]
            return
        for child in ast.iter_child_nodes(node):
            self.node(child, guards)

    def child(self, name: str) -> str:
        """The qualname of ``name`` defined in the scope on top (``Cursor.child_qualname``)."""
        kind, qual = self.scopes[-1]
        if kind == "module":
            return name
        return f"{qual}.{name}" if kind == "class" else f"{qual}.<locals>.{name}"

    def definition(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, guards: tuple[str, ...]
    ) -> None:
        is_class = isinstance(node, ast.ClassDef)
        self.scopes.append(("class" if is_class else "function", self.child(node.name)))
        self.decorating += 1
        for decorator in node.decorator_list:  # they run where the definition stands
            self.node(decorator, guards)
        self.decorating -= 1
        if isinstance(node, ast.ClassDef):
            for expr in (*node.bases, *node.keywords):
                self.node(expr, guards)
            self.block(node.body, guards)
        else:
            self.node(node.args, guards)
            if node.returns is not None:
                self.node(node.returns, guards)
            self.block(node.body, ())
        self.scopes.pop()

    def call(self, node: ast.Call, guards: tuple[str, ...]) -> None:
        scopes = self.scopes
        scope = scopes[-2][1] if self.decorating and len(scopes) > 1 else scopes[-1][1]
        function = next((q for k, q in reversed(scopes) if k == "function"), "")
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
        elif isinstance(func, ast.Subscript) and (inner := _dotted(func.value)) is not None:
            root_kind, root = RootKind.SUBSCRIPT, inner
        if root_kind is RootKind.DYNAMIC:
            root = self.code(func, self.offset(node.lineno, node.col_offset))[:80]
        key = (node.lineno, node.col_offset, -(node.end_lineno or 0), -(node.end_col_offset or 0))
        guard = " and ".join(guards) or None
        args = (
            _arguments(node, function, self.child("<lambda>")) if node.args or node.keywords else ()
        )
        raw = RawCall(node.lineno, root_kind, root, tuple(attrs), guard, args)
        self.calls[scope].append((key, raw))

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
