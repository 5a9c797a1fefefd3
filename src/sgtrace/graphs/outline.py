"""The cheap index pass: a module's definitions, from the stdlib parser, without call sites.

Resolving the calls of one module asks about the names it imports: is ``X`` a class, what are
its bases, what does ``self.y`` hold, what does ``f`` return? Those answers need only the
*definitions* of the imported modules, not their call sites. This pass collects exactly the
definition part of a :class:`ModuleSummary` with ``ast`` (about ten times faster than a libcst
parse); the libcst passes of ``collect.py`` run on the modules whose calls are analysed.
Both produce the same definitions (``tests/graphs/test_outline.py`` compares them).

Cheaper still, :func:`scan_class_bases` and :func:`scan_defined_names` read class statements
and defined names from the bytes of every file, for the index's superset questions (which
classes may subclass ``X``; which names exist, for "did you mean").
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict

from sgtrace.graphs.summary import (
    KIND_BY_DECORATOR,
    ClassInfo,
    DefKind,
    FunctionInfo,
    Gathered,
    ImportRef,
    ModuleSummary,
    Param,
    ValueExpr,
    ValueKind,
    assemble_summary,
)
from sgtrace.graphs.values import ast_dotted

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _annotation(node: ast.expr | None) -> str | None:
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ast.unparse(node)


def _values(node: ast.expr | None, scope: str) -> tuple[ValueExpr, ...]:
    if node is None:
        return ()
    if isinstance(node, ast.IfExp):
        return _values(node.body, scope) + _values(node.orelse, scope)
    if isinstance(node, ast.BoolOp):
        return tuple(v for value in node.values for v in _values(value, scope))
    if isinstance(node, ast.Call):
        name = ast_dotted(node.func)
        return (ValueExpr(ValueKind.CALL, name, scope),) if name else ()
    name = ast_dotted(node)
    if name is None or name in ("None", "True", "False"):
        return ()
    if name.startswith("self.") and name.count(".") == 1:
        return (ValueExpr(ValueKind.SELF_ATTR, name[5:], scope),)
    return (ValueExpr(ValueKind.NAME, name, scope),)


def _is_abstract(node: ast.FunctionDef | ast.AsyncFunctionDef, decorators: list[str]) -> bool:
    if any(d.endswith("abstractmethod") for d in decorators):
        return True
    body = [
        s
        for s in node.body
        if not (
            isinstance(s, ast.Expr)
            and isinstance(s.value, ast.Constant)
            and isinstance(s.value.value, str)
        )
    ]
    if len(body) != 1 or not isinstance(body[0], ast.Raise):
        return False
    return "NotImplementedError" in ast.unparse(body[0])


class _Outliner:
    def __init__(self, module: str, is_package: bool) -> None:
        self.package = module if is_package else module.rpartition(".")[0]
        self.imports: dict[str, dict[str, ImportRef]] = defaultdict(dict)
        self.functions: dict[str, FunctionInfo] = {}
        self.classes: dict[str, ClassInfo] = {}
        self.locals: dict[str, dict[str, list[ValueExpr]]] = defaultdict(lambda: defaultdict(list))
        self.assigned: dict[str, dict[str, list[ValueExpr]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self.returned: dict[str, list[ValueExpr]] = defaultdict(list)
        self.members: dict[str, list[str]] = defaultdict(list)
        self.annotations: dict[str, dict[str, str]] = defaultdict(dict)

    # scope: (qualname, kind, function qualname or "", enclosing class of a method or None)
    def body(
        self, stmts: list[ast.stmt], qual: str, kind: str, function: str, owner: str | None
    ) -> None:
        for stmt in stmts:
            self.stmt(stmt, qual, kind, function, owner)

    def child(self, qual: str, kind: str, name: str) -> str:
        if kind == "module":
            return name
        return f"{qual}.{name}" if kind == "class" else f"{qual}.<locals>.{name}"

    def stmt(self, node: ast.stmt, qual: str, kind: str, function: str, owner: str | None) -> None:
        if isinstance(node, _FUNCS):
            self.function(node, qual, kind, owner)
        elif isinstance(node, ast.ClassDef):
            self.klass(node, qual, kind)
        elif isinstance(node, ast.Import):
            self.import_names(node, function)
        elif isinstance(node, ast.ImportFrom):
            self.import_from(node, function)
        elif isinstance(node, ast.Assign):
            values = _values(node.value, function)
            for target in node.targets:
                self.record(target, values, qual, owner)
        elif isinstance(node, ast.AnnAssign):
            self.ann_assign(node, qual, kind, function, owner)
        elif isinstance(node, ast.Return) and function:
            self.returned[function].extend(_values(node.value, function))
        else:
            self.nested_blocks(node, qual, kind, function, owner)

    def nested_blocks(
        self, node: ast.stmt, qual: str, kind: str, function: str, owner: str | None
    ) -> None:
        """The statements inside if/for/while/with/try/match blocks, in the same scope."""
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for inner in getattr(node, field, ()) or ():
                if isinstance(inner, (ast.ExceptHandler, ast.match_case)):
                    self.body(inner.body, qual, kind, function, owner)
                elif isinstance(inner, ast.stmt):
                    self.stmt(inner, qual, kind, function, owner)

    def import_names(self, node: ast.Import, function: str) -> None:
        for alias in node.names:
            if alias.asname:
                self.imports[function][alias.asname] = ImportRef(alias.name)
            else:
                head = alias.name.split(".")[0]
                self.imports[function][head] = ImportRef(head)

    def import_from(self, node: ast.ImportFrom, function: str) -> None:
        base = node.module or ""
        if node.level:
            parts = self.package.split(".") if self.package else []
            up = node.level - 1
            parts = parts[: len(parts) - up] if up else parts
            base = ".".join([*parts, base] if base else parts)
        for alias in node.names:
            if alias.name == "*":
                self.imports[function][f"*{base}"] = ImportRef(base, "*")
            else:
                self.imports[function][alias.asname or alias.name] = ImportRef(base, alias.name)

    def record(
        self, target: ast.expr, values: tuple[ValueExpr, ...], qual: str, owner: str | None
    ) -> None:
        if isinstance(target, ast.Name):
            self.locals[qual][target.id].extend(values)
            return
        name = ast_dotted(target)
        if name and owner is not None and name.startswith("self.") and name.count(".") == 1:
            self.assigned[owner][name[5:]].extend(values)

    def ann_assign(
        self, node: ast.AnnAssign, qual: str, kind: str, function: str, owner: str | None
    ) -> None:
        text = _annotation(node.annotation)
        if kind == "class" and isinstance(node.target, ast.Name) and text:
            self.annotations[qual][node.target.id] = text
        values = _values(node.value, function)
        if text:
            values = (ValueExpr(ValueKind.ANNOTATION, text, function), *values)
        self.record(node.target, values, qual, owner)

    def function(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef, qual: str, kind: str, owner: str | None
    ) -> None:
        decorators = [
            ast_dotted(d.func if isinstance(d, ast.Call) else d) or "" for d in node.decorator_list
        ]
        name = self.child(qual, kind, node.name)
        method_owner = qual if kind == "class" else owner
        if not any(d.endswith((".setter", ".deleter")) for d in decorators):
            def_kind = DefKind.METHOD if kind == "class" else DefKind.FUNCTION
            for deco in decorators:
                def_kind = KIND_BY_DECORATOR.get(deco, def_kind) if kind == "class" else def_kind
            args = node.args
            params = tuple(
                Param(a.arg, _annotation(a.annotation))
                for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)
            )
            self.functions[name] = FunctionInfo(
                qualname=name,
                line=node.lineno,
                kind=def_kind,
                params=params,
                returns=_annotation(node.returns),
                is_abstract=_is_abstract(node, decorators),
            )
            self.members[qual].append(node.name)
        self.body(node.body, name, "function", name, method_owner)

    def klass(self, node: ast.ClassDef, qual: str, kind: str) -> None:
        name = self.child(qual, kind, node.name)
        bases = tuple(b for b in (ast_dotted(base) for base in node.bases) if b)
        self.classes[name] = ClassInfo(qualname=name, line=node.lineno, bases=bases)
        self.members[qual].append(node.name)
        self.body(node.body, name, "class", "" if kind != "function" else qual, None)


def outline_module(
    source: str, module: str, file: str, is_package: bool, tree: ast.Module | None = None
) -> ModuleSummary | None:
    """The definitions of a module (no call sites), or ``None`` when ``ast`` cannot parse it
    (the caller then falls back to the libcst passes, which report the error). ``tree`` is
    ``ast.parse(source)`` when the caller has it already."""
    try:
        tree = tree or ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    out = _Outliner(module, is_package)
    out.body(tree.body, "", "module", "", None)
    gathered = Gathered(
        imports=out.imports,
        locals=out.locals,
        assigned=out.assigned,
        returned=out.returned,
        members=out.members,
        annotations=out.annotations,
    )
    return assemble_summary(
        module, file, is_package, out.functions, out.classes, gathered, is_outline=True
    )


# -- textual scans ----------------------------------------------------------------------------
# Cheaper still than ``ast``: superset answers ("which classes may subclass X?") from the text.
# Each pattern starts with a literal keyword, so the regular-expression engine skips ahead to
# it instead of trying every position of every line; a match counts only when the keyword
# starts its line's code (after indentation, and ``async`` for a ``def``), as it would with a
# ``^``-anchored multi-line pattern.

_CLASS_WITH_BASES = re.compile(rb"class[ \t]+(\w+)[ \t]*\(([^)]*)\)")
_DEF = re.compile(rb"def[ \t]+(\w+)")
_CLASS = re.compile(rb"class[ \t]+(\w+)")
_INDENT = re.compile(rb"[ \t]*")
_INDENT_ASYNC = re.compile(rb"[ \t]*(?:async[ \t]+)?")


def _starts_line(text: bytes, pos: int, prefix: re.Pattern[bytes]) -> bool:
    """Whether only ``prefix`` (indentation) stands between the line's start and ``pos``."""
    return prefix.fullmatch(text, text.rfind(b"\n", 0, pos) + 1, pos) is not None


def scan_class_bases(text: bytes) -> list[tuple[str, list[str]]]:
    """``(class name, [base name, ...])`` for each ``class Name(...)`` statement; a base is
    the last dotted part of what is written, subscripts dropped (``mod.Base[T]`` -> ``Base``)."""
    found = []
    pos = 0
    while (match := _CLASS_WITH_BASES.search(text, pos)) is not None:
        if not _starts_line(text, match.start(), _INDENT):
            pos = match.start() + 1  # not a statement: what it spans may hold one
            continue
        found.append((match.group(1).decode(), base_names(match.group(2))))
        pos = match.end()
    return found


def base_names(written: bytes) -> list[str]:
    """The base names in what a class statement's parentheses hold (``b"mod.A, B[T], k=v"`` ->
    ``["A", "B"]``): the last dotted part of each, subscripts dropped, keywords skipped."""
    names = []
    for base in written.decode(errors="replace").split(","):
        name = base.strip().rsplit(".", 1)[-1].split("[", 1)[0]
        if name.isidentifier():
            names.append(name)
    return names


def scan_defined_names(text: bytes) -> set[str]:
    """Every name after a ``def`` (or ``async def``) or ``class`` that starts a line's code."""
    names = set()
    for pattern in (_DEF, _CLASS):
        for match in pattern.finditer(text):
            if _starts_line(text, match.start(), _INDENT_ASYNC):
                names.add(match.group(1).decode())
    return names
