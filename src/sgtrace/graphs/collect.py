"""The collection passes: one libcst visitor per concern, run in one batched traversal.

* :class:`ImportCollector` — what each imported name refers to, per scope.
* :class:`DefinitionCollector` — classes (bases, declared attributes) and functions (kind,
  parameters, return annotation, abstractness).
* :class:`AssignmentCollector` — what local names, ``self`` attributes and ``return`` hold.
* :class:`CallSiteCollector` — every call, its callee chain, line and guarding condition.

:func:`collect_module` runs them (see ``PASSES``) and assembles a :class:`ModuleSummary`.
Nothing here imports or executes the code under study.
"""

from __future__ import annotations

import gc
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import libcst as cst

from sgtrace.graphs.exprs import annotation_text, code_of, dotted, raw_call, value_exprs
from sgtrace.graphs.lines import LineTable, table_from_ast, table_from_positions
from sgtrace.graphs.scope import Cursor, ScopeKind
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
    ValueExpr,
    ValueKind,
    assemble_summary,
)
from sgtrace.graphs.walk import walk_batched


class _Pass(cst.BatchableCSTVisitor):
    def __init__(self, cursor: Cursor) -> None:
        super().__init__()
        self.cursor = cursor


class ImportCollector(_Pass):
    """Binds imported names in the module scope or in the function that imports them."""

    def __init__(self, cursor: Cursor, module: str, is_package: bool) -> None:
        super().__init__(cursor)
        self.package = module if is_package else module.rpartition(".")[0]
        self.by_scope: dict[str, dict[str, ImportRef]] = defaultdict(dict)

    def _bind(self, local: str, ref: ImportRef) -> None:
        function = self.cursor.function
        self.by_scope[function.qualname if function else ""][local] = ref

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = dotted(alias.name) or ""
            if alias.asname is not None:
                self._bind(dotted(alias.asname.name) or name, ImportRef(name))
            else:
                head = name.split(".")[0]
                self._bind(head, ImportRef(head))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        base = dotted(node.module) if node.module is not None else ""
        if node.relative:
            parts = self.package.split(".") if self.package else []
            up = len(node.relative) - 1
            parts = parts[: len(parts) - up] if up else parts
            base = ".".join([*parts, base] if base else parts)
        if isinstance(node.names, cst.ImportStar):
            self._bind(f"*{base}", ImportRef(base, "*"))
            return
        for alias in node.names:
            name = dotted(alias.name) or ""
            local = dotted(alias.asname.name) if alias.asname is not None else name
            self._bind(local or name, ImportRef(base or "", name))


def _decorator_names(node: cst.FunctionDef) -> list[str]:
    names = []
    for deco in node.decorators:
        expr = deco.decorator.func if isinstance(deco.decorator, cst.Call) else deco.decorator
        names.append(dotted(expr) or "")
    return names


def _is_abstract(node: cst.FunctionDef, decorators: list[str]) -> bool:
    if any(d.endswith("abstractmethod") for d in decorators):
        return True
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    stmts = [
        s
        for s in body
        if not (
            isinstance(s, cst.SimpleStatementLine)
            and all(
                isinstance(e, cst.Expr)
                and isinstance(e.value, (cst.SimpleString, cst.ConcatenatedString))
                for e in s.body
            )
        )
    ]
    if len(stmts) != 1 or not isinstance(stmts[0], cst.SimpleStatementLine):
        return False
    small = stmts[0].body[0]
    return isinstance(small, cst.Raise) and "NotImplementedError" in code_of(small)


class DefinitionCollector(_Pass):
    """Records classes and functions with their declared shapes."""

    def __init__(self, cursor: Cursor) -> None:
        super().__init__(cursor)
        self.functions: dict[str, FunctionInfo] = {}
        self.classes: dict[str, ClassInfo] = {}
        self.members: dict[str, list[str]] = defaultdict(list)
        self.annotations: dict[str, dict[str, str]] = defaultdict(dict)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        scope = self.cursor.scope  # already pushed by the cursor
        bases = tuple(b for b in (dotted(a.value) for a in node.bases if a.keyword is None) if b)
        self.classes[scope.qualname] = ClassInfo(scope.qualname, self.cursor.def_line(), bases)
        self._note_member(scope.name)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        scope = self.cursor.scope
        decorators = _decorator_names(node)
        if any(d.endswith((".setter", ".deleter")) for d in decorators):
            return  # the property's getter keeps the name
        in_class = len(self.cursor.scopes) > 1 and self.cursor.scopes[-2].kind is ScopeKind.CLASS
        kind = DefKind.METHOD if in_class else DefKind.FUNCTION
        for deco in decorators:
            kind = KIND_BY_DECORATOR.get(deco, kind) if in_class else kind
        params = [*node.params.posonly_params, *node.params.params, *node.params.kwonly_params]
        self.functions[scope.qualname] = FunctionInfo(
            qualname=scope.qualname,
            line=self.cursor.def_line(),
            kind=kind,
            params=tuple(Param(p.name.value, annotation_text(p.annotation)) for p in params),
            returns=annotation_text(node.returns),
            is_abstract=_is_abstract(node, decorators),
        )
        self._note_member(scope.name)

    def _note_member(self, name: str) -> None:
        parent = self.cursor.scopes[-2]
        self.members[parent.qualname].append(name)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self.cursor.scope.kind is ScopeKind.CLASS and isinstance(node.target, cst.Name):
            text = annotation_text(node.annotation)
            if text:
                self.annotations[self.cursor.scope.qualname][node.target.value] = text


class AssignmentCollector(_Pass):
    """Records what names, ``self`` attributes and ``return`` statements hold."""

    def __init__(self, cursor: Cursor) -> None:
        super().__init__(cursor)
        self.locals: dict[str, dict[str, list[ValueExpr]]] = defaultdict(lambda: defaultdict(list))
        self.assigned: dict[str, dict[str, list[ValueExpr]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self.returned: dict[str, list[ValueExpr]] = defaultdict(list)

    def _record(self, target: cst.BaseExpression, values: tuple[ValueExpr, ...]) -> None:
        scope = self.cursor.scope
        if isinstance(target, cst.Name):
            self.locals[scope.qualname][target.value].extend(values)
            return
        name = dotted(target)
        owner = self.cursor.enclosing_class()
        if name and owner is not None and name.startswith("self.") and name.count(".") == 1:
            self.assigned[owner.qualname][name[5:]].extend(values)

    def visit_Assign(self, node: cst.Assign) -> None:
        function = self.cursor.function
        values = value_exprs(node.value, function.qualname if function else "")
        for target in node.targets:
            self._record(target.target, values)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        function = self.cursor.function
        scope = function.qualname if function else ""
        text = annotation_text(node.annotation)
        values = value_exprs(node.value, scope)
        if text:
            values = (ValueExpr(ValueKind.ANNOTATION, text, scope), *values)
        self._record(node.target, values)

    def visit_Return(self, node: cst.Return) -> None:
        function = self.cursor.function
        if function is not None:
            self.returned[function.qualname].extend(value_exprs(node.value, function.qualname))


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
        self.calls[scope.qualname].append(raw_call(node, self.cursor.call_line(), guard))


PASSES = (ImportCollector, DefinitionCollector, AssignmentCollector, CallSiteCollector)


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
    table = table_from_ast(source)
    result = _run_passes(tree, table, module, file, is_package) if table else None
    if result is None:
        result = _run_passes(tree, table_from_positions(tree), module, file, is_package)
    assert result is not None
    return result


def _run_passes(
    tree: cst.Module, table: LineTable, module: str, file: str, is_package: bool
) -> ModuleSummary | None:
    cursor = Cursor(table)
    imports = ImportCollector(cursor, module, is_package)
    defs = DefinitionCollector(cursor)
    assigns = AssignmentCollector(cursor)
    calls = CallSiteCollector(cursor)
    walk_batched(tree, [imports, defs, assigns, calls], cursor.before_visit, cursor.after_leave)
    if not cursor.is_aligned():
        return None
    gathered = Gathered(
        imports=imports.by_scope,
        locals=assigns.locals,
        assigned=assigns.assigned,
        returned=assigns.returned,
        members=defs.members,
        annotations=defs.annotations,
        calls=calls.calls,
    )
    return assemble_summary(module, file, is_package, defs.functions, defs.classes, gathered)
