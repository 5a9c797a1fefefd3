"""Values inside values: containers, tuples, iteration, subscripts and container annotations.

The :class:`~sgtrace.graphs.resolve.Resolver` asks here what composite expressions hold:
``for req in batch.reqs`` (the elements of ``List[Req]``), ``a, b = pair`` (a tuple's
positions), ``table[key](...)`` (a dict of classes or functions), ``with cm as x``
(``__enter__``'s result), ``OrderedDict(mapping).items()`` and the like. Functions here take the
resolver as their first argument; they hold no state of their own.

>>> parse_annotation("Dict[str, List[Req]]").head
'Dict'
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sgtrace.graphs.summary import ValueExpr, ValueKind
from sgtrace.graphs.values import (
    ClassValue,
    ContainerMethod,
    ContainerValue,
    FunctionValue,
    Handler,
    How,
    InstanceValue,
    TupleValue,
    Value,
    Values,
    ast_dotted,
    merge,
)
from sgtrace.names import QualName

if TYPE_CHECKING:
    from sgtrace.graphs.resolve import Resolver

_UNION = {"Optional", "Union", "Annotated", "ClassVar", "Final", "Required", "NotRequired"}
_TYPE = {"Type", "type"}
_SEQUENCES = {
    "List", "list", "Sequence", "MutableSequence", "Iterable", "Iterator", "Collection",
    "Set", "set", "FrozenSet", "frozenset", "AbstractSet", "MutableSet", "Deque", "deque",
    "Generator", "AsyncIterator", "AsyncIterable", "AsyncGenerator", "Reversible",
}  # fmt: skip
_MAPPINGS = {
    "Dict", "dict", "Mapping", "MutableMapping", "OrderedDict", "DefaultDict", "defaultdict",
}  # fmt: skip
_MAKE_SEQUENCE = {"list", "tuple", "sorted", "reversed", "set", "frozenset", "iter", "deque"}
_MAKE_MAPPING = {"dict", "OrderedDict", "defaultdict"}
BUILDERS = frozenset({*_MAKE_SEQUENCE, *_MAKE_MAPPING, "enumerate", "zip", "next"})
_ITEMS = {"get", "pop", "setdefault", "__getitem__"}  # a mapping's value / a sequence's element
_NO_TYPE = {"None", "Any", "object"}


@dataclass(frozen=True)
class Annotation:
    """An annotation's tree: ``head`` (last dotted part for generics) and its arguments."""

    head: str
    dotted: str
    args: tuple[Annotation, ...] = ()
    is_ellipsis: bool = False


def parse_annotation(text: str) -> Annotation | None:
    try:
        return _tree(ast.parse(text.strip(), mode="eval").body, 0)
    except SyntaxError:
        return None


def _tree(node: ast.expr, depth: int) -> Annotation | None:
    if depth > 8:
        return None
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return parse_annotation(node.value)
        return Annotation("", "", is_ellipsis=node.value is Ellipsis)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        parts = (_tree(node.left, depth + 1), _tree(node.right, depth + 1))
        return Annotation("Union", "Union", tuple(p for p in parts if p is not None))
    if isinstance(node, ast.Subscript):
        head = ast_dotted(node.value) or ""
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if isinstance(node.slice, ast.List):  # Callable[[...], R]
            elts = [node.slice]
        args = tuple(a for a in (_tree(e, depth + 1) for e in elts) if a is not None)
        return Annotation(head.rsplit(".", 1)[-1], head, args)
    dotted = ast_dotted(node)
    return Annotation(dotted.rsplit(".", 1)[-1], dotted) if dotted else None


def annotation_values(
    resolver: Resolver, module: str, scope: str, text: str, self_types: frozenset[QualName]
) -> Values:
    """What a value declared as ``text`` may be: instances of the classes it names, the class
    objects of ``Type[X]``, containers of them (``List[X]``, ``Dict[K, V]``, ``Tuple[A, B]``)."""
    tree = parse_annotation(text)
    return _annotated(resolver, module, scope, tree, self_types, False) if tree else {}


def _annotated(
    resolver: Resolver,
    module: str,
    scope: str,
    tree: Annotation,
    self_types: frozenset[QualName],
    is_class_object: bool,
) -> Values:
    def each(arg: Annotation, as_class: bool = False) -> Values:
        return _annotated(resolver, module, scope, arg, self_types, as_class)

    head, args = tree.head, tree.args
    if head in _UNION:
        chosen = args[:1] if head == "Annotated" else args
        return {v: h for a in chosen for v, h in each(a, is_class_object).items()}
    if head in _TYPE and args:
        return {v: h for a in args for v, h in each(a, True).items()}
    if args and head in _SEQUENCES:
        return {ContainerValue(frozenset(each(args[0]))): How.ANNOTATION}
    if len(args) == 2 and head in _MAPPINGS:
        keys, items = frozenset(each(args[0])), frozenset(each(args[1]))
        return {ContainerValue(keys, items, True): How.ANNOTATION}
    if args and head in ("Tuple", "tuple"):
        if len(args) == 2 and args[1].is_ellipsis:
            return {ContainerValue(frozenset(each(args[0]))): How.ANNOTATION}
        return {TupleValue(tuple(frozenset(each(a)) for a in args)): How.ANNOTATION}
    if args or not tree.dotted or tree.head in _NO_TYPE:
        return {}
    found: Values = {}
    for value in resolver.dotted(module, scope, tree.dotted, self_types):
        if isinstance(value, ClassValue):
            made = value if is_class_object else InstanceValue(value.name)
            merge(found, {made: How.ANNOTATION})
    return found


# -- composite expressions --------------------------------------------------------------------
def evaluate_composite(
    resolver: Resolver, module: str, expr: ValueExpr, self_types: frozenset[QualName]
) -> Values:
    """The values of the composite forms of :class:`ValueExpr` (``kind`` beyond a name, a call
    of a dotted name, a ``self`` attribute or an annotation)."""
    kind = expr.kind
    if kind is ValueKind.LAMBDA:
        return {FunctionValue(QualName(module, expr.text)): How.REFERENCE}
    if kind is ValueKind.CONTAINER:
        parts = [resolver.evaluate(module, e, self_types) for e in expr.inner]
        if expr.text == "tuple":
            return {TupleValue(tuple(frozenset(p) for p in parts)): How.LOCAL}
        if expr.text == "dict":
            return {make_mapping(_flat(parts)): How.LOCAL}
        return {ContainerValue(_flat(parts)): How.LOCAL}
    inner = resolver.evaluate(module, expr.inner[0], self_types) if expr.inner else {}
    if kind is ValueKind.ELEMENT:
        return elements(resolver, inner, is_async=expr.text == "async")
    if kind is ValueKind.ITEM:
        return item(resolver, inner, int(expr.text))
    if kind is ValueKind.SUBSCRIPT:
        return subscript(resolver, inner)
    if kind is ValueKind.ENTERED:
        return entered(resolver, inner, is_async=expr.text == "async")
    if kind is ValueKind.CALL_OF:
        return resolver.call_result(inner)
    if kind is ValueKind.MEMBER:
        return resolver.members(inner, expr.text)
    return {}


def _flat(parts: list[Values]) -> frozenset[Value]:
    return frozenset(v for p in parts for v in p)


def make_mapping(pairs: frozenset[Value]) -> ContainerValue:
    """A mapping built from (key, value) pairs, as ``dict(pairs)`` builds one."""
    keys = frozenset(v for p in pairs if isinstance(p, TupleValue) for v in _at(p, 0))
    items = frozenset(v for p in pairs if isinstance(p, TupleValue) for v in _at(p, 1))
    return ContainerValue(keys, items, True)


def _every_position(value: TupleValue) -> frozenset[Value]:
    return frozenset(v for position in value.positions for v in position)


def _at(value: TupleValue, position: int) -> frozenset[Value]:
    return value.positions[position] if position < len(value.positions) else frozenset()


def _protocol(resolver: Resolver, value: InstanceValue, method: str) -> Values:
    member = resolver.class_member(value.name, method)
    if member is None:
        return {}
    return resolver.returns(FunctionValue(member[0], value.name))


def elements(resolver: Resolver, values: Values, is_async: bool = False) -> Values:
    """What iterating each of ``values`` yields (with ``async for`` when ``is_async``: an
    object's ``__aiter__``/``__anext__``; an ``AsyncIterator[T]`` yields ``T``)."""
    found: Values = {}
    start, step = ("__aiter__", "__anext__") if is_async else ("__iter__", "__next__")
    for value in values:
        if isinstance(value, ContainerValue):
            merge(found, dict.fromkeys(value.elements, How.ELEMENT))
        elif isinstance(value, TupleValue):
            merge(found, dict.fromkeys(_every_position(value), How.ELEMENT))
        elif isinstance(value, InstanceValue):
            iterator = _protocol(resolver, value, start)
            nested = {v: h for v, h in iterator.items() if v != value}
            merge(found, elements(resolver, nested, is_async) if nested else {}, How.ELEMENT)
            if value in iterator or not iterator:
                merge(found, _protocol(resolver, value, step), How.ELEMENT)
    return found


def item(resolver: Resolver, values: Values, position: int) -> Values:
    """Position ``position`` of unpacking each of ``values``."""
    found: Values = {}
    for value in values:
        if isinstance(value, TupleValue):
            merge(found, dict.fromkeys(_at(value, position), How.ELEMENT))
        elif isinstance(value, (ContainerValue, InstanceValue)):
            merge(found, elements(resolver, {value: How.ELEMENT}))
    return found


def subscript(resolver: Resolver, values: Values) -> Values:
    """What ``value[key]`` may be for each of ``values``, whatever the key."""
    found: Values = {}
    for value in values:
        if isinstance(value, ContainerValue):
            held = value.items if value.is_mapping else value.elements
            merge(found, dict.fromkeys(held, How.REFERENCE))
        elif isinstance(value, TupleValue):
            merge(found, dict.fromkeys(_every_position(value), How.REFERENCE))
        elif isinstance(value, InstanceValue):
            merge(found, _protocol(resolver, value, "__getitem__"), How.ELEMENT)
    return found


def entered(resolver: Resolver, values: Values, is_async: bool = False) -> Values:
    """What ``with value as x`` binds: ``__enter__``'s result (``__aenter__``'s for ``async
    with``; the value itself when unknown)."""
    found: Values = {}
    method = "__aenter__" if is_async else "__enter__"
    for value, how in values.items():
        result = _protocol(resolver, value, method) if isinstance(value, InstanceValue) else {}
        merge(found, result or {value: how})
    return found


def container_member(value: ContainerValue, attr: str) -> Values:
    """``container.attr``: the methods whose results the inference knows."""
    if attr in (*_ITEMS, "items", "values", "keys", "copy", "pop", "popleft", "__iter__"):
        return {ContainerMethod(value, attr): How.LOCAL}
    return {}  # append, update, ...: a builtin method, unresolved as such


def container_call(method: ContainerMethod) -> Values:
    """What calling a container's method returns."""
    box, name = method.container, method.name
    if name == "items" and box.is_mapping:
        pair = TupleValue((box.elements, box.items))
        return {ContainerValue(frozenset({pair})): How.ELEMENT}
    if name == "values" and box.is_mapping:
        return {ContainerValue(box.items): How.ELEMENT}
    if name in ("keys", "copy", "__iter__"):
        return {box if name == "copy" else ContainerValue(box.elements): How.ELEMENT}
    held = box.items if box.is_mapping else box.elements
    return dict.fromkeys(held, How.ELEMENT)


def builtin_result(resolver: Resolver, short: str, args: list[Values]) -> Values | None:
    """What a builtin or ``collections`` constructor named ``short`` returns for these
    arguments: ``list(xs)``, ``zip(a, b)``, ``OrderedDict(pairs)``, ``next(it)``."""
    if not args:
        return None
    first = args[0]
    if short in _MAKE_SEQUENCE:
        return {ContainerValue(frozenset(elements(resolver, first))): How.ELEMENT}
    if short in _MAKE_MAPPING:
        pairs = frozenset(elements(resolver, first))
        return {make_mapping(pairs): How.ELEMENT} if pairs else None
    if short == "enumerate":
        pair = TupleValue((frozenset(), frozenset(elements(resolver, first))))
        return {ContainerValue(frozenset({pair})): How.ELEMENT}
    if short == "zip":
        pair = TupleValue(tuple(frozenset(elements(resolver, a)) for a in args))
        return {ContainerValue(frozenset({pair})): How.ELEMENT}
    if short == "next":
        return elements(resolver, first)
    return None


def callables_in(values: Values, keys: frozenset[QualName] = frozenset()) -> list[Handler]:
    """The functions among ``values`` and inside the tuples and containers among them, each
    with the classes a tuple pairs it with (``(Req, handle)``: ``handle`` keyed by ``Req``)."""
    found: list[Handler] = []
    for value in values:
        if isinstance(value, FunctionValue):
            found.append(Handler(value, keys))
        elif isinstance(value, TupleValue):
            held = {v: How.LOCAL for p in value.positions for v in p}
            paired = frozenset(v.name for v in held if isinstance(v, ClassValue))
            found.extend(callables_in(held, paired or keys))
        elif isinstance(value, ContainerValue):
            found.extend(callables_in(dict.fromkeys((*value.elements, *value.items), How.LOCAL)))
    return found
