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
from collections.abc import Sequence

from sgtrace.graphs.flow import FlowRecorder, Place, annotation_of, child_name
from sgtrace.graphs.spans import block_of
from sgtrace.graphs.summary import (
    KIND_BY_DECORATOR,
    ClassInfo,
    DefKind,
    FunctionInfo,
    Gathered,
    ImportRef,
    ModuleSummary,
    Param,
    RawCall,
    assemble_summary,
)
from sgtrace.graphs.values import ast_dotted

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


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


def _decorators(nodes: list[ast.expr]) -> list[str]:
    return [ast_dotted(d.func if isinstance(d, ast.Call) else d) or "" for d in nodes]


def _written(nodes: list[ast.expr]) -> tuple[str, ...]:
    """Decorators as written, ``()`` marking a call (``register()`` for ``@register("x")``)."""
    found = []
    for deco in nodes:
        name = ast_dotted(deco.func if isinstance(deco, ast.Call) else deco)
        if name and name not in KIND_BY_DECORATOR and not name.endswith("abstractmethod"):
            found.append(f"{name}()" if isinstance(deco, ast.Call) else name)
    return tuple(found)


class _Outliner:
    def __init__(self, module: str, is_package: bool, lines: Sequence[str]) -> None:
        self.package = module if is_package else module.rpartition(".")[0]
        self.imports: dict[str, dict[str, ImportRef]] = defaultdict(dict)
        self.functions: dict[str, FunctionInfo] = {}
        self.classes: dict[str, ClassInfo] = {}
        self.members: dict[str, list[str]] = defaultdict(list)
        self.annotations: dict[str, dict[str, str]] = defaultdict(dict)
        self.flow = FlowRecorder(lines)

    def body(self, stmts: list[ast.stmt], at: Place) -> None:
        inner = at.inside(block_of(stmts))
        for stmt in stmts:
            self.stmt(stmt, inner)

    def stmt(self, node: ast.stmt, at: Place) -> None:
        if isinstance(node, _FUNCS):
            self.function(node, at)
        elif isinstance(node, ast.ClassDef):
            self.klass(node, at)
        elif isinstance(node, ast.Import):
            self.import_names(node, at.function)
        elif isinstance(node, ast.ImportFrom):
            self.import_from(node, at.function)
        else:
            if isinstance(node, ast.AnnAssign) and at.kind == "class":
                text = annotation_of(node.annotation)
                if isinstance(node.target, ast.Name) and text:
                    self.annotations[at.qual][node.target.id] = text
            self.flow.statement(node, at)
            self.nested_blocks(node, at)

    def nested_blocks(self, node: ast.stmt, at: Place) -> None:
        """The statements inside if/for/while/with/try/match blocks, in the same scope."""
        for field in _BLOCKS:
            inner = getattr(node, field, None)
            if not inner:
                continue
            if isinstance(inner[0], (ast.ExceptHandler, ast.match_case)):
                for handler in inner:
                    self.body(handler.body, at)
            else:
                self.body(inner, at)

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

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, at: Place) -> None:
        decorators = _decorators(node.decorator_list)
        name = child_name(at.qual, at.kind, node.name)
        method_owner = at.qual if at.kind == "class" else at.owner
        args = node.args
        own = (*args.posonlyargs, *args.args, *args.kwonlyargs)
        if not any(d.endswith((".setter", ".deleter")) for d in decorators):
            def_kind = DefKind.METHOD if at.kind == "class" else DefKind.FUNCTION
            for deco in decorators:
                def_kind = KIND_BY_DECORATOR.get(deco, def_kind) if at.kind == "class" else def_kind
            self.functions[name] = FunctionInfo(
                qualname=name,
                line=node.lineno,
                kind=def_kind,
                params=tuple(Param(a.arg, annotation_of(a.annotation)) for a in own),
                returns=annotation_of(node.returns),
                is_abstract=_is_abstract(node, decorators),
                decorators=_written(node.decorator_list),
            )
            self.members[at.qual].append(node.name)
        self.flow.decorators(node, at)
        names = {a.arg for a in own}
        params = (*(p for p in at.params if p[0] not in names), *((n, name) for n in names))
        self.body(node.body, Place(name, "function", name, method_owner, tuple(sorted(params))))

    def klass(self, node: ast.ClassDef, at: Place) -> None:
        name = child_name(at.qual, at.kind, node.name)
        bases = tuple(b for b in (ast_dotted(base) for base in node.bases) if b)
        is_dataclass = any(d.endswith("dataclass") for d in _decorators(node.decorator_list))
        self.classes[name] = ClassInfo(name, node.lineno, bases, is_dataclass=is_dataclass)
        self.members[at.qual].append(node.name)
        function = at.qual if at.kind == "function" else ""
        self.body(node.body, Place(name, "class", function, None, at.params))


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
    return outline_tree(tree, module, file, is_package, source.splitlines())[0]


def outline_tree(
    tree: ast.Module, module: str, file: str, is_package: bool, lines: Sequence[str] = ()
) -> tuple[ModuleSummary, dict[str, list[RawCall]]]:
    """The outline of a parsed module, and the protocol calls its statements make without a
    call expression (``with``, ``for``), per scope, for the full pass to add to its calls."""
    out = _Outliner(module, is_package, lines)
    out.body(tree.body, Place("", "module", "", None))
    flow = out.flow
    gathered = Gathered(
        imports=out.imports,
        locals=flow.locals,
        assigned=flow.assigned,
        returned=flow.returned,
        members=out.members,
        annotations=out.annotations,
        bindings=flow.bindings,
        param_calls=flow.param_calls,
    )
    functions = {**flow.lambdas, **out.functions}
    summary = assemble_summary(
        module, file, is_package, functions, out.classes, gathered, is_outline=True
    )
    return summary, flow.implicit


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
