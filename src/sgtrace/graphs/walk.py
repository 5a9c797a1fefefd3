"""A fast, read-only batched traversal of a libcst tree.

``libcst.visit_batched`` rebuilds every node as it goes (``_visit_and_replace_children``),
which costs more than parsing. The collectors only read, so this walker visits the same
nodes in the same order (the order libcst's own ``_visit_and_replace_children`` lists them,
read once per node type from libcst's source) without rebuilding, and skips pure-syntax
fields (whitespace, commas, parentheses) that hold nothing the collectors look at. It calls
the visitors' ``visit_<Node>``, ``visit_<Node>_<field>``, ``leave_<Node>_<field>`` and
``leave_<Node>`` methods exactly like ``libcst.visit_batched``.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import libcst as cst

_SYNTAX = (
    "whitespace",
    "lpar",
    "rpar",
    "comma",
    "leading_lines",
    "lines_after_decorators",
    "header",
    "footer",
    "semicolon",
    "colon",
    "equal",
    "dot",
    "star",
    "operator",
    "asynchronous",
    "newline",
    "lbracket",
    "rbracket",
    "lbrace",
    "rbrace",
    "lines_after",
)
_ORDER: dict[type, tuple[str, ...]] = {}


def _is_syntax(field: str) -> bool:
    return any(part in field for part in _SYNTAX)


def _field_order(kind: type) -> tuple[str, ...]:
    """The child fields of ``kind`` in libcst's visiting order, minus pure syntax."""
    order = _ORDER.get(kind)
    if order is not None:
        return order
    names = [f.name for f in dataclasses.fields(kind)]
    try:
        method = kind._visit_and_replace_children  # type: ignore[attr-defined]
        source = textwrap.dedent(inspect.getsource(method))
        listed = [
            node.args[1].value
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call)
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ]
        # ast.walk is breadth-first; visiting order is the textual order of the calls
        listed = sorted(set(listed), key=lambda n: source.index(f'"{n}"'))
        names = listed + [n for n in names if n not in listed]
    except (OSError, TypeError, SyntaxError):
        pass
    order = tuple(n for n in names if not _is_syntax(n))
    _ORDER[kind] = order
    return order


_IS_NODE: dict[type, bool] = {}
_NAMES: dict[type, tuple[str, ...]] = {}


def _note(kind: type) -> bool:
    _IS_NODE[kind] = issubclass(kind, cst.CSTNode)
    return _IS_NODE[kind]


def _visitor_names(kind: type) -> tuple[str, ...]:
    """The ``visit_*``/``leave_*`` method names a visitor class defines (cached per class)."""
    names = _NAMES.get(kind)
    if names is None:
        names = tuple(
            n
            for n in dir(kind)
            if n.startswith(("visit_", "leave_"))
            and callable(getattr(kind, n))
            and getattr(kind, n) is not getattr(cst.BatchableCSTVisitor, n, None)
        )
        _NAMES[kind] = names
    return names


def _children(value: Any, is_node: dict[type, bool]) -> Sequence[cst.CSTNode]:
    """The nodes held by one field: a node, a sequence of nodes, or nothing."""
    kind = type(value)
    if kind is tuple or kind is list:
        return [
            item
            for item in value
            if is_node.get(type(item)) or (type(item) not in is_node and _note(type(item)))
        ]
    if is_node.get(kind) or (kind not in is_node and _note(kind)):
        return (value,)
    return ()


Method = Callable[[cst.CSTNode], object]
# What to call on one node type: its visit_<Node> methods, then per field (name,
# visit_<Node>_<field>, leave_<Node>_<field>), then its leave_<Node> methods.
FieldPlan = tuple[str, Sequence[Method], Sequence[Method]]
Plan = tuple[Sequence[Method], tuple[FieldPlan, ...], Sequence[Method]]


def _method_table(visitors: Sequence[cst.BatchableCSTVisitor]) -> dict[str, list[Method]]:
    table: dict[str, list[Method]] = {}
    for visitor in visitors:
        for name in _visitor_names(type(visitor)):
            table.setdefault(name, []).append(getattr(visitor, name))
    return table


def walk_batched(
    tree: cst.CSTNode,
    visitors: Sequence[cst.BatchableCSTVisitor],
    before_visit: Method,
    after_leave: Method,
) -> None:
    """Visit ``tree`` with every visitor in one read-only pass."""
    table = _method_table(visitors)
    plans: dict[type, Plan] = {}

    def plan(kind: type) -> Plan:
        found = plans.get(kind)
        if found is None:
            type_name = kind.__name__
            fields = tuple(
                (
                    f,
                    table.get(f"visit_{type_name}_{f}", ()),
                    table.get(f"leave_{type_name}_{f}", ()),
                )
                for f in _field_order(kind)
            )
            found = (
                table.get(f"visit_{type_name}", ()),
                fields,
                table.get(f"leave_{type_name}", ()),
            )
            plans[kind] = found
        return found

    is_node = _IS_NODE

    def visit(node: cst.CSTNode) -> None:
        before_visit(node)
        enter, fields, leave = plan(type(node))
        for method in enter:
            method(node)
        for name, enter_field, leave_field in fields:
            children = _children(getattr(node, name), is_node)
            if not children:
                continue
            for method in enter_field:
                method(node)
            for child in children:
                visit(child)
            for method in leave_field:
                method(node)
        for method in leave:
            method(node)
        after_leave(node)

    visit(tree)
