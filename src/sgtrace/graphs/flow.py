"""What names hold, read with the stdlib parser: the value facts both collection passes share.

Both the cheap outline pass and the full libcst pass take their value facts from here, so they
agree by construction: what each local name, ``self`` attribute, class attribute and ``return``
may hold (:class:`~sgtrace.graphs.summary.ValueExpr`), where each local is bound
(:class:`~sgtrace.graphs.summary.Binding`, for a flow-sensitive type at a call), lambdas,
calls of parameters (``callback()``), and the protocol calls a statement makes without a call
expression (``with cm:`` calls ``cm.__enter__``, ``async for x in obj`` ``obj.__aiter__``).

>>> fact = value_of(ast.parse("[A(), b]", mode="eval").body, "f")
>>> fact.kind.value, [v.text for v in fact.inner]
('container', ['A', 'b'])
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from sgtrace.graphs.spans import lines_of, own_expressions
from sgtrace.graphs.summary import (
    Binding,
    DefKind,
    FunctionInfo,
    Param,
    ParamCall,
    RawCall,
    RootKind,
    ValueExpr,
    ValueKind,
)
from sgtrace.graphs.values import How, ast_dotted

LAMBDA = "<lambda>"
_CALLED_NAME = re.compile(r"(\w+)\s*\(")  # a name written before an opening parenthesis
_LEAVES = frozenset({ast.Name, ast.Constant, ast.Load, ast.Store, ast.Del})  # nothing inside
_NO_VALUE = ("None", "True", "False")
ASYNC = "async"  # the text of an ELEMENT or ENTERED fact of `async for` / `async with`
_ITERATE = {"": ("__iter__", "__next__"), ASYNC: ("__aiter__", "__anext__")}
_ENTER = {"": ("__enter__", "__exit__"), ASYNC: ("__aenter__", "__aexit__")}


def annotation_of(node: ast.expr | None) -> str | None:
    """An annotation's text, string annotations unquoted."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ast.unparse(node)


def child_name(scope: str, kind: str, name: str) -> str:
    """The ``__qualname__`` of ``name`` defined in ``scope`` (a module, class or function)."""
    if kind == "module":
        return name
    return f"{scope}.{name}" if kind == "class" else f"{scope}.<locals>.{name}"


def values_of(node: ast.expr | None, scope: str, lambda_scope: str = "") -> tuple[ValueExpr, ...]:
    """The values ``node`` may evaluate to: both arms of ``a if c else b``, every side of
    ``a or b``, else the one :func:`value_of` understands. ``lambda_scope`` is the qualname a
    lambda written in ``node`` gets (see :func:`lambda_name`)."""
    if node is None:
        return ()
    if isinstance(node, ast.IfExp):
        return values_of(node.body, scope, lambda_scope) + values_of(
            node.orelse, scope, lambda_scope
        )
    if isinstance(node, ast.BoolOp):
        return tuple(v for value in node.values for v in values_of(value, scope, lambda_scope))
    found = value_of(node, scope, lambda_scope)
    return (found,) if found is not None else ()


def value_of(node: ast.expr, scope: str, lambda_scope: str = "") -> ValueExpr | None:
    """One expression as a :class:`ValueExpr`, or ``None`` for forms inference ignores."""
    if isinstance(node, ast.Call):
        args = _arguments(node, scope, lambda_scope)
        name = ast_dotted(node.func)
        if name is not None:
            return ValueExpr(ValueKind.CALL, name, scope, args)
        callee = value_of(node.func, scope, lambda_scope)
        if callee is None:
            return None
        return ValueExpr(ValueKind.CALL_OF, "", scope, (callee, *args))
    if isinstance(node, _CONTAINERS):
        return _container(node, scope, lambda_scope)
    if isinstance(node, ast.Subscript):
        inner = value_of(node.value, scope, lambda_scope)
        return ValueExpr(ValueKind.SUBSCRIPT, "", scope, (inner,)) if inner else None
    if isinstance(node, ast.Lambda):
        return ValueExpr(ValueKind.LAMBDA, lambda_scope or LAMBDA, scope)
    if isinstance(node, ast.NamedExpr):
        return value_of(node.value, scope, lambda_scope)
    if isinstance(node, ast.Await):
        return value_of(node.value, scope, lambda_scope)
    name = ast_dotted(node)
    if name is None and isinstance(node, ast.Attribute):  # `make().attr`: an attribute of a value
        owner = value_of(node.value, scope, lambda_scope)
        return ValueExpr(ValueKind.MEMBER, node.attr, scope, (owner,)) if owner else None
    if name is None or name in _NO_VALUE:
        return None
    if name.startswith("self.") and name.count(".") == 1:
        return ValueExpr(ValueKind.SELF_ATTR, name[5:], scope)
    return ValueExpr(ValueKind.NAME, name, scope)


_CONTAINERS = (ast.Tuple, ast.List, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.GeneratorExp)


def _container(node: ast.expr, scope: str, lambda_scope: str) -> ValueExpr:
    """A literal tuple, list, set, dict or comprehension: what it holds, by position for a
    tuple, as (key, value) pairs for a dict."""
    if isinstance(node, ast.Tuple):
        items = tuple(_operand(e, scope, lambda_scope) for e in node.elts)
        return ValueExpr(ValueKind.CONTAINER, "tuple", scope, items)
    if isinstance(node, ast.Dict):
        pairs = tuple(
            ValueExpr(
                ValueKind.CONTAINER,
                "tuple",
                scope,
                (_operand(k, scope, lambda_scope), _operand(v, scope, lambda_scope)),
            )
            for k, v in zip(node.keys, node.values, strict=True)
            if k is not None
        )
        return ValueExpr(ValueKind.CONTAINER, "dict", scope, pairs)
    if isinstance(node, (ast.List, ast.Set)):
        found = (value_of(e, scope, lambda_scope) for e in node.elts)
        return ValueExpr(ValueKind.CONTAINER, "list", scope, tuple(v for v in found if v))
    element = value_of(node.elt, scope, lambda_scope)  # type: ignore[attr-defined]
    return ValueExpr(ValueKind.CONTAINER, "list", scope, (element,) if element else ())


def _arguments(node: ast.Call, scope: str, lambda_scope: str) -> tuple[ValueExpr, ...]:
    """A call's arguments as operands: every positional one, in place (``zip(a, b)``), then the
    keyword ones that may name functions (a dispatcher's handlers, ``callback=f``)."""
    if not node.args and not node.keywords:
        return ()
    positional = [
        _operand(a, scope, lambda_scope) for a in node.args if not isinstance(a, ast.Starred)
    ]
    keywords = [v for k, v in call_args(node, scope) if not k.isdigit()]
    found = (*positional, *keywords)
    return found if any(_may_name_code(v) for v in found) else ()


def _operand(node: ast.expr, scope: str, lambda_scope: str) -> ValueExpr:
    """An operand whose position matters: an unknown one is an empty container."""
    return value_of(node, scope, lambda_scope) or ValueExpr(ValueKind.CONTAINER, "list", scope)


def lambda_name(scope: str, parent_kind: str) -> str:
    """The qualname of a lambda written in ``scope`` (``parent_kind``: module, class or
    function), as Python names it: ``f.<locals>.<lambda>``."""
    return child_name(scope, parent_kind, LAMBDA)


def call_args(node: ast.Call, scope: str) -> tuple[tuple[str, ValueExpr], ...]:
    """The arguments of a call that may name functions or classes, as (position, value) or
    (keyword, value): names, ``self`` attributes, lambdas, containers and calls of them."""
    found: list[tuple[str, ValueExpr]] = []
    for position, arg in enumerate(node.args):
        value = value_of(arg, scope)
        if value is not None and _may_name_code(value):
            found.append((str(position), value))
    for keyword in node.keywords:
        value = value_of(keyword.value, scope)
        if keyword.arg is not None and value is not None and _may_name_code(value):
            found.append((keyword.arg, value))
    return tuple(found)


def _may_name_code(value: ValueExpr) -> bool:
    if value.kind is ValueKind.CONTAINER:
        return any(_may_name_code(v) for v in value.inner)
    if value.kind is ValueKind.CALL:
        return value.text.endswith("partial") or any(_may_name_code(v) for v in value.inner)
    return value.kind in (ValueKind.NAME, ValueKind.SELF_ATTR, ValueKind.LAMBDA)


@dataclass(frozen=True)
class Place:
    """Where a statement stands: its scope, the function whose names it uses, the class of
    ``self`` (through nested functions), parameters visible by name, and its block's lines."""

    qual: str
    kind: str  # "module", "class" or "function"
    function: str
    owner: str | None
    params: tuple[tuple[str, str], ...] = ()  # (parameter name, its function), innermost last
    block: tuple[int, int] = (0, 0)

    @property
    def lambda_name(self) -> str:
        """The qualname of a lambda written here."""
        return lambda_name(self.qual, self.kind)

    def inside(self, block: tuple[int, int]) -> Place:
        """The same place, in another statement list."""
        return Place(self.qual, self.kind, self.function, self.owner, self.params, block)


class FlowRecorder:
    """Gathers value facts statement by statement; the outline pass drives it."""

    def __init__(self, lines: Sequence[str] = ()) -> None:
        self.lines = lines  # the module's source lines, to skip expressions with nothing to find
        self.locals: dict[str, dict[str, list[ValueExpr]]] = defaultdict(lambda: defaultdict(list))
        self.assigned: dict[str, dict[str, list[ValueExpr]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self.returned: dict[str, list[ValueExpr]] = defaultdict(list)
        self.bindings: dict[str, dict[str, list[Binding]]] = defaultdict(lambda: defaultdict(list))
        self.param_calls: dict[str, list[ParamCall]] = defaultdict(list)
        self.implicit: dict[str, list[RawCall]] = defaultdict(list)
        self.lambdas: dict[str, FunctionInfo] = {}

    # -- statements ---------------------------------------------------------------------------
    def statement(self, node: ast.stmt, at: Place) -> None:
        """The value facts of one simple or compound statement's own expressions."""
        scope = at.function
        if isinstance(node, ast.Assign):
            values = values_of(node.value, scope, at.lambda_name)
            for target in node.targets:
                self.bind(target, values, node.lineno, at)
        elif isinstance(node, ast.AnnAssign):
            values = values_of(node.value, scope, at.lambda_name)
            text = annotation_of(node.annotation)
            if text and at.kind != "class":  # a class's annotations are kept apart
                values = (ValueExpr(ValueKind.ANNOTATION, text, scope), *values)
            self.bind(node.target, values, node.lineno, at)
        elif isinstance(node, ast.Return) and scope:
            self.returned[scope].extend(values_of(node.value, scope, at.lambda_name))
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            mode = ASYNC if isinstance(node, ast.AsyncFor) else ""
            iterable = value_of(node.iter, scope, at.lambda_name)
            element = ValueExpr(ValueKind.ELEMENT, mode, scope, (iterable,)) if iterable else None
            loop = at.inside(lines_of(node))
            self.bind(node.target, (element,) if element else (), node.lineno, loop)
            self.protocol(node.iter, _ITERATE[mode], node.lineno, at)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            mode = ASYNC if isinstance(node, ast.AsyncWith) else ""
            for item in node.items:
                manager = value_of(item.context_expr, scope, at.lambda_name)
                if item.optional_vars is not None and manager is not None:
                    entered = ValueExpr(ValueKind.ENTERED, mode, scope, (manager,))
                    self.bind(item.optional_vars, (entered,), node.lineno, at)
                self.protocol(item.context_expr, _ENTER[mode], node.lineno, at)
        if self._may_hold_facts(node, at):
            for expr in own_expressions(node):
                self.expression(expr, at)

    def _may_hold_facts(self, node: ast.stmt, at: Place) -> bool:
        """Whether the statement's own text may hold a lambda, a walrus, a comprehension or a
        call of a parameter (walking every expression costs a third of the outline pass)."""
        if not self.lines:
            return True
        body = getattr(node, "body", None)
        last = node.end_lineno or node.lineno
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            last = max(node.lineno, body[0].lineno - 1)  # a compound statement's header only
        text = "\n".join(self.lines[node.lineno - 1 : last])
        if "lambda" in text or ":=" in text or "for " in text:
            return True
        if not at.params or "(" not in text:
            return False
        called = set(_CALLED_NAME.findall(text))
        return any(name in called for name, _ in at.params)

    def bind(self, target: ast.expr, values: tuple[ValueExpr, ...], line: int, at: Place) -> None:
        """``target = values``: a name, a ``self`` attribute, or a tuple of them."""
        if isinstance(target, (ast.Tuple, ast.List)):
            for position, element in enumerate(target.elts):
                item = tuple(
                    ValueExpr(ValueKind.ITEM, str(position), v.scope, (v,)) for v in values
                )
                self.bind(element, item, line, at)
            return
        if isinstance(target, ast.Starred):
            return
        if isinstance(target, ast.Name):
            if at.kind == "class":  # a class attribute, read through the class or an instance
                self.assigned[at.qual][target.id].extend(values)
                return
            self.locals[at.qual][target.id].extend(values)
            if at.kind == "function":
                binding = Binding(line, at.block, tuple(dict.fromkeys(values)))
                self.bindings[at.qual][target.id].append(binding)
            return
        name = ast_dotted(target)
        if name and at.owner is not None and name.startswith("self.") and name.count(".") == 1:
            self.assigned[at.owner][name[5:]].extend(values)

    def decorators(self, node: ast.FunctionDef | ast.AsyncFunctionDef, at: Place) -> None:
        """A decorator written without a call is called where the function is defined."""
        for deco in node.decorator_list:
            chain = None if isinstance(deco, ast.Call) else _chain(deco)
            if chain is not None:
                kind, root, attrs = chain
                raw = RawCall(deco.lineno, kind, root, attrs, implicit=How.DECORATOR)
                self.implicit[at.qual].append(raw)

    def protocol(self, node: ast.expr, methods: tuple[str, ...], line: int, at: Place) -> None:
        """The calls a ``with``/``for`` statement makes on ``node``'s value without a call
        expression, kept only when they resolve (an object that defines the method)."""
        chain = _chain(node)
        if chain is None:
            return
        kind, root, attrs = chain
        for method in methods:
            raw = RawCall(line, kind, root, (*attrs, method), implicit=How.PROTOCOL)
            self.implicit[at.qual].append(raw)

    # -- expressions --------------------------------------------------------------------------
    def expression(self, node: ast.expr, at: Place) -> None:
        """Walrus targets, comprehension variables, lambdas and calls of parameters."""
        stack: list[ast.AST] = [node]
        pop, extend, children = stack.pop, stack.extend, ast.iter_child_nodes
        while stack:
            current = pop()
            kind = type(current)
            if kind in _LEAVES:
                continue
            if kind is ast.Lambda:
                self.lambda_(current, at)  # type: ignore[arg-type]
                continue
            if kind is ast.Call:
                func = current.func  # type: ignore[attr-defined]
                if type(func) is ast.Name and at.params:
                    self.param_call(func.id, current.lineno, at)  # type: ignore[attr-defined]
            elif kind is ast.NamedExpr:
                values = values_of(current.value, at.function, at.lambda_name)  # type: ignore[attr-defined]
                self.bind(current.target, values, current.lineno, at)  # type: ignore[attr-defined]
            elif kind is ast.comprehension:
                self.comprehension(current, at)  # type: ignore[arg-type]
            extend(children(current))

    def comprehension(self, node: ast.comprehension, at: Place) -> None:
        iterable = value_of(node.iter, at.function, at.lambda_name)
        if iterable is not None:
            mode = ASYNC if node.is_async else ""
            element = ValueExpr(ValueKind.ELEMENT, mode, at.function, (iterable,))
            self.bind(node.target, (element,), node.iter.lineno, at)

    def param_call(self, name: str, line: int, at: Place) -> None:
        for param, function in reversed(at.params):
            if param == name:
                self.param_calls[function].append(ParamCall(param, line, at.qual))
                return

    def lambda_(self, node: ast.Lambda, at: Place) -> None:
        name = at.lambda_name
        args = node.args
        params = tuple(Param(a.arg) for a in (*args.posonlyargs, *args.args, *args.kwonlyargs))
        if name not in self.lambdas:
            self.lambdas[name] = FunctionInfo(name, node.lineno, DefKind.FUNCTION, params)
        visible = tuple(p for p in at.params if p[0] not in {q.name for q in params})
        inner = Place(
            name, "function", name, at.owner, (*visible, *((p.name, name) for p in params))
        )
        self.returned[name].extend(values_of(node.body, name, inner.lambda_name))
        self.expression(node.body, inner)


def _chain(node: ast.expr) -> tuple[RootKind, str, tuple[str, ...]] | None:
    """The callee chain of a ``with``/``for`` operand: a dotted name (``self.lock``) or the
    call of one (``torch.cuda.stream(s)``); other forms are skipped."""
    name = ast_dotted(node)
    if name is not None:
        head, *attrs = name.split(".")
        return RootKind.NAME, head, tuple(attrs)
    callee = ast_dotted(node.func) if isinstance(node, ast.Call) else None
    return (RootKind.CALL, callee, ()) if callee and callee != "super" else None
