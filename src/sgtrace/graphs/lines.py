"""Line numbers for libcst nodes, by ordinal, without libcst's position metadata.

libcst's ``PositionProvider`` costs more than the parse itself. The collectors only need the
line of three node types (calls, function and class definitions), and libcst visits them in
source order (pre-order). The stdlib ``ast`` gives each such node its line ten times faster;
sorted by (start, -end) its nodes come in the same pre-order. So the n-th ``Call`` the
collector visits sits on ``calls[n]``. The collector checks the pairing (count and callee
name) and falls back to ``PositionProvider`` for a file where it does not hold.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider


@dataclass(frozen=True)
class LineTable:
    """Lines of calls and definitions in pre-order, and each call's last callee name."""

    calls: tuple[int, ...]
    call_names: tuple[str, ...]
    defs: tuple[int, ...]


def _callee_name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def table_from_ast(source: str) -> LineTable | None:
    """The table built from the stdlib parser, or ``None`` when it cannot parse the file."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    return table_from_tree(tree)


def table_from_tree(tree: ast.Module) -> LineTable:
    """The table of a module already parsed by the stdlib parser."""
    calls: list[tuple[int, int, int, int, str]] = []
    defs: list[tuple[int, int, int]] = []
    for node in _nodes(tree):
        if isinstance(node, ast.Call):
            key = (
                node.lineno,
                node.col_offset,
                -(node.end_lineno or 0),
                -(node.end_col_offset or 0),
            )
            calls.append((*key, _callee_name(node.func)))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            defs.append((first, node.col_offset, node.lineno))
    calls.sort()
    defs.sort()
    return LineTable(
        calls=tuple(c[0] for c in calls),
        call_names=tuple(c[4] for c in calls),
        defs=tuple(d[2] for d in defs),
    )


_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
_LEAVES = (ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop)


def _child_fields(kind: type) -> tuple[str, ...]:
    """The fields of an ``ast`` node type that may hold nodes worth visiting: none for names
    and constants, and never the load/store contexts or operators (childless singletons)."""
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        leaf = kind is ast.Name or kind is ast.Constant
        names: tuple[str, ...] = getattr(kind, "_fields", ())
        fields = () if leaf else tuple(f for f in names if f not in ("ctx", "op", "ops"))
        _CHILD_FIELDS[kind] = fields
    return fields


def _nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` but contexts and operators, in no particular order (the table
    sorts them): ``ast.walk`` without its generator and per-field calls, a few times faster."""
    found: list[ast.AST] = [tree]
    append, extend, fields_of = found.append, found.extend, _child_fields
    for node in found:  # grows while it is read: a breadth-first walk
        for name in fields_of(type(node)):
            value = getattr(node, name, None)
            if type(value) is list:
                extend(v for v in value if isinstance(v, ast.AST) and not isinstance(v, _LEAVES))
            elif isinstance(value, ast.AST) and not isinstance(value, _LEAVES):
                append(value)
    return found


class _PositionRecorder(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.call_names: list[str] = []
        self.defs: list[int] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(self.get_metadata(PositionProvider, node).start.line)
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
        self.call_names.append(name if isinstance(name, str) else "")

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.defs.append(self.get_metadata(PositionProvider, node.name).start.line)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.defs.append(self.get_metadata(PositionProvider, node.name).start.line)


def table_from_positions(module: cst.Module) -> LineTable:
    """The slow, always-right table from libcst's own position metadata."""
    recorder = _PositionRecorder()
    MetadataWrapper(module, unsafe_skip_copy=True).visit(recorder)
    return LineTable(tuple(recorder.calls), tuple(recorder.call_names), tuple(recorder.defs))
