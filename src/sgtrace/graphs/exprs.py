"""Small conversions from libcst expressions to the summary's vocabulary."""

from __future__ import annotations

import libcst as cst

from sgtrace.graphs.summary import RawCall, RootKind, ValueExpr, ValueKind

_EMPTY = cst.Module(body=())


def dotted(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else ``None``."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def code_of(node: cst.CSTNode) -> str:
    """The source text of ``node`` on one line."""
    return " ".join(_EMPTY.code_for_node(node).split())


def callee_chain(func: cst.BaseExpression) -> tuple[RootKind, str, tuple[str, ...]]:
    """Split a callee into its root and attribute names.

    ``self.a.m`` -> (NAME, "self", ("a", "m")); ``super().m`` -> (SUPER, "", ("m",));
    ``make()(x)`` -> (CALL, "make", ()); ``f(x).m`` -> (CALL, "f", ("m",));
    ``table[k](x)`` -> (SUBSCRIPT, "table", ()).
    """
    attrs: list[str] = []
    node = func
    while isinstance(node, cst.Attribute):
        attrs.append(node.attr.value)
        node = node.value
    attrs.reverse()
    if isinstance(node, cst.Name):
        return RootKind.NAME, node.value, tuple(attrs)
    if isinstance(node, cst.Call):
        inner = dotted(node.func)
        if inner == "super":
            return RootKind.SUPER, "", tuple(attrs)
        if inner is not None:
            return RootKind.CALL, inner, tuple(attrs)
    if isinstance(node, cst.Subscript):
        inner = dotted(node.value)
        if inner is not None:
            return RootKind.SUBSCRIPT, inner, tuple(attrs)
    return RootKind.DYNAMIC, code_of(node)[:80], tuple(attrs)


def raw_call(node: cst.Call, line: int, guard: str | None, scope: str, lambda_name: str) -> RawCall:
    """The :class:`RawCall` of a libcst ``Call`` node; ``scope`` is the function whose names
    its arguments use, ``lambda_name`` the qualname of a lambda written there."""
    kind, root, attrs = callee_chain(node.func)
    args = tuple(
        (arg.keyword.value if arg.keyword is not None else str(position), value)
        for position, arg in enumerate(node.args)
        if arg.star == "" and (value := reference(arg.value, scope, lambda_name)) is not None
    )
    return RawCall(line, kind, root, attrs, guard, args)


def reference(node: cst.BaseExpression, scope: str, lambda_name: str) -> ValueExpr | None:
    """An argument that may name functions or classes, or whose type the callee may learn: a
    (dotted) name, a ``self`` attribute, a lambda, ``partial(f, ...)``, the call of a dotted
    name (``Worker()``), an item of a table, or a literal container of them; else ``None``."""
    if isinstance(node, cst.Lambda):
        return ValueExpr(ValueKind.LAMBDA, lambda_name, scope)
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        items = [reference(e.value, scope, lambda_name) for e in node.elements]
        if not any(items):
            return None
        kind = "tuple" if isinstance(node, cst.Tuple) else "list"
        empty = ValueExpr(ValueKind.CONTAINER, "list", scope)
        return ValueExpr(ValueKind.CONTAINER, kind, scope, tuple(i or empty for i in items))
    if isinstance(node, cst.Subscript):  # table[key]: what the table holds
        held = reference(node.value, scope, lambda_name)
        return ValueExpr(ValueKind.SUBSCRIPT, "", scope, (held,)) if held else None
    if isinstance(node, cst.Call):
        name = dotted(node.func)
        if name is None:
            return None
        if not name.endswith("partial"):  # its result: a type for the callee's parameter
            return ValueExpr(ValueKind.CALL, name, scope)
        if not node.args:
            return None
        inner = reference(node.args[0].value, scope, lambda_name)
        return ValueExpr(ValueKind.CALL, name, scope, (inner,)) if inner else None
    name = dotted(node)
    if name is None or name in ("None", "True", "False"):
        return None
    if name.startswith("self.") and name.count(".") == 1:
        return ValueExpr(ValueKind.SELF_ATTR, name[5:], scope)
    return ValueExpr(ValueKind.NAME, name, scope)
