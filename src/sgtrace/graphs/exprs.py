"""Small conversions from libcst expressions to the summary's vocabulary."""

from __future__ import annotations

import ast

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
    ``make()(x)`` -> (CALL, "make", ()); ``f(x).m`` -> (CALL, "f", ("m",)).
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
    return RootKind.DYNAMIC, code_of(node)[:80], tuple(attrs)


def raw_call(node: cst.Call, line: int, guard: str | None) -> RawCall:
    """The :class:`RawCall` of a libcst ``Call`` node."""
    kind, root, attrs = callee_chain(node.func)
    return RawCall(line=line, root_kind=kind, root=root, attrs=attrs, guard=guard)


def value_exprs(node: cst.BaseExpression | None, scope: str) -> tuple[ValueExpr, ...]:
    """The value expressions a right-hand side may evaluate to (both arms of ``a if c else b``,
    both sides of ``a or b``), restricted to forms the inference understands."""
    if node is None:
        return ()
    if isinstance(node, cst.IfExp):
        return value_exprs(node.body, scope) + value_exprs(node.orelse, scope)
    if isinstance(node, cst.BooleanOperation):
        return value_exprs(node.left, scope) + value_exprs(node.right, scope)
    if isinstance(node, cst.Call):
        name = dotted(node.func)
        return (ValueExpr(ValueKind.CALL, name, scope),) if name else ()
    name = dotted(node)
    if name is None:
        return ()
    if name.startswith("self.") and name.count(".") == 1:
        return (ValueExpr(ValueKind.SELF_ATTR, name[5:], scope),)
    if name in ("None", "True", "False"):
        return ()
    return (ValueExpr(ValueKind.NAME, name, scope),)


def annotation_text(node: cst.Annotation | None) -> str | None:
    """The text of an annotation, with string annotations unquoted."""
    if node is None:
        return None
    ann = node.annotation
    if isinstance(ann, cst.SimpleString):
        value = ann.evaluated_value
        return value if isinstance(value, str) else None
    name = dotted(ann)  # most annotations: already canonical, without generating code
    return name if name is not None else canonical(code_of(ann))


def canonical(text: str) -> str:
    """An expression in the stdlib's canonical spelling (``ast.unparse``), so that both
    passes write annotations alike: ``Optional[ "X" ]`` -> ``Optional['X']``."""
    try:
        return ast.unparse(ast.parse(text, mode="eval"))
    except SyntaxError:
        return text
