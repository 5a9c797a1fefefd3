"""What a name or expression may stand for during resolution, and how it was found.

Resolution maps names to *values*: a module, a class object, an instance of a class, a function,
or something outside the analysed source. Each value is paired with a :class:`How` saying by
which rule it was found; that becomes the ``how`` of a call-graph edge.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from enum import Enum

from sgtrace.names import QualName


class How(str, Enum):
    """The rule that resolved a call, from least to most specific."""

    LOCAL = "local"  # defined in the same module
    IMPORT = "import"  # through an import (re-exports included)
    CLOSURE = "closure"  # a nested function of an enclosing function
    MRO = "mro"  # self.m(), cls.m() through the class's C3 MRO
    SUPER = "super"  # super().m()
    SUBCLASS = "subclass"  # a mixin's self.m() found in the class that mixes it in
    ANNOTATION = "annotation"  # a declared type (parameter, return or attribute annotation)
    ATTRIBUTE_TYPE = "attribute-type"  # self.attr whose type comes from an assignment
    PROPERTY = "property"  # through a @property's returned value or return annotation
    FACTORY = "factory"  # a class returned by a function, then instantiated
    OVERRIDE = "override"  # an overrider of an abstract method
    ELEMENT = "element"  # a loop, comprehension or unpacking variable typed by its iterable
    REFERENCE = "reference"  # a function or class held in a variable or container, then called
    ARGUMENT = "argument"  # a value passed as an argument: a function called, a parameter's type
    DECORATOR = "decorator"  # a decorated name calls the wrapper, the wrapper the original
    DISPATCH = "dispatch"  # a callable stored in an object whose __call__ calls it (by type)
    PROTOCOL = "protocol"  # a method Python calls implicitly: __enter__, __aiter__, ...
    DATACLASS = "dataclass"  # a dataclass's generated __init__ runs its __post_init__
    EXTERNAL = "external"  # code outside the analysed source: an external node `module:name`


RANK = {how: index for index, how in enumerate(How)}
RANK[How.EXTERNAL] = -1  # any rule that finds the source's own code says more


def says_more(new: How, old: How) -> bool:
    """Whether ``new`` is the better label for a value (or callee) already found by ``old``:
    the more specific rule, except that what a caller passes (``argument``) gives way to any
    other rule of the source that finds the same value (it is the less direct evidence)."""
    if How.ARGUMENT in (new, old) and How.EXTERNAL not in (new, old) and new is not old:
        return old is How.ARGUMENT
    return RANK[new] > RANK[old]


@dataclass(frozen=True)
class ModuleValue:
    name: str


@dataclass(frozen=True)
class ClassValue:
    name: QualName


@dataclass(frozen=True)
class InstanceValue:
    name: QualName
    carried: frozenset[Handler] = frozenset()  # callables given to its constructor


@dataclass(frozen=True)
class FunctionValue:
    name: QualName
    receiver: QualName | None = None  # the class of `self` for a bound method


@dataclass(frozen=True)
class Handler:
    """A callable given to a dispatcher's constructor, with the classes it was paired with
    (``(GenerateReq, self.handle_generate)``); no ``keys``: registered for anything."""

    function: FunctionValue
    keys: frozenset[QualName] = frozenset()


@dataclass(frozen=True)
class ExternalValue:
    """A name outside the analysed source, ``torch.cuda.Stream.synchronize``; its first
    ``module_parts`` dotted parts are a module by an import statement (``import torch``: 1)."""

    dotted: str
    module_parts: int = 0

    @property
    def node(self) -> QualName:
        """Its external node ``module:name``. The module is what the import names as one
        (``import torch``, ``from torch.cuda import Stream``: ``torch``, ``torch.cuda``), then
        each following lower-case part but the last, as modules are named (PEP 8): the first
        part with a capital letter starts the name. ``torch.cuda.Stream.synchronize`` under
        ``import torch`` is ``torch.cuda:Stream.synchronize``; ``torch.cuda.synchronize`` is
        ``torch.cuda:synchronize``. Without an import (a bare name), the last part is the
        name and the rest the module; a bare name is a member of ``builtins``.

        >>> ExternalValue("torch.cuda.Stream.synchronize", 1).node
        QualName(module='torch.cuda', qualname='Stream.synchronize')
        """
        parts = self.dotted.split(".")
        if not 0 < self.module_parts < len(parts):
            module, _, name = self.dotted.rpartition(".")
            return QualName(module or "builtins", name)
        end = self.module_parts
        while end < len(parts) - 1 and parts[end] == parts[end].lower():
            end += 1
        return QualName(".".join(parts[:end]), ".".join(parts[end:]))

    def member(self, attr: str) -> ExternalValue:
        """``self.attr``, with the same known module."""
        return ExternalValue(f"{self.dotted}.{attr}", self.module_parts)


@dataclass(frozen=True)
class ContainerValue:
    """A list, set, iterator or mapping whose contents are known: ``elements`` is what
    iterating it yields (a mapping's keys), ``items`` what subscripting a mapping yields."""

    elements: frozenset[Value]
    items: frozenset[Value] = frozenset()
    is_mapping: bool = False


@dataclass(frozen=True)
class TupleValue:
    """A tuple whose positions are known: ``(Cls, self.handle)``."""

    positions: tuple[frozenset[Value], ...]


@dataclass(frozen=True)
class ContainerMethod:
    """A method of a container, bound to it: ``mapping.items``."""

    container: ContainerValue
    name: str


Value = (
    ModuleValue
    | ClassValue
    | InstanceValue
    | FunctionValue
    | ExternalValue
    | ContainerValue
    | TupleValue
    | ContainerMethod
)
Values = dict[Value, How]


def merge(into: Values, new: Values, how: How | None = None) -> Values:
    """Add ``new`` to ``into``, keeping the more specific ``how`` of each value."""
    for value, found in new.items():
        label = max(found, how, key=lambda h: RANK[h]) if how is not None else found
        old = into.get(value)
        if old is None or says_more(label, old):
            into[value] = label
    return into


_UNION = {
    "Optional",
    "Union",
    "typing.Optional",
    "typing.Union",
    "Annotated",
    "typing.Annotated",
    "ClassVar",
    "typing.ClassVar",
    "Final",
    "typing.Final",
}
_TYPE = {"Type", "type", "typing.Type"}


@dataclass(frozen=True)
class AnnotationPart:
    """One class named by an annotation, and whether it means the class object (``Type[X]``)."""

    dotted: str
    is_class_object: bool = False


def annotation_parts(text: str) -> list[AnnotationPart]:
    """The classes an annotation names, looking through Optional, Union, ``|`` and Type.

    >>> annotation_parts("Optional[Union[Type[A], b.B]]")
    [AnnotationPart(dotted='A', is_class_object=True), AnnotationPart(dotted='b.B', is_class_object=False)]
    """
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return []
    return _parts(tree, False, 0)


def _parts(node: ast.expr, is_class_object: bool, depth: int) -> list[AnnotationPart]:
    if depth > 8:
        return []
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [
            AnnotationPart(p.dotted, p.is_class_object or is_class_object)
            for p in annotation_parts(node.value)
        ]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _parts(node.left, is_class_object, depth + 1) + _parts(
            node.right, is_class_object, depth + 1
        )
    if isinstance(node, ast.Subscript):
        head = ast_dotted(node.value)
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head in _UNION:
            first_only = head.endswith("Annotated")
            chosen = args[:1] if first_only else args
            return [p for a in chosen for p in _parts(a, is_class_object, depth + 1)]
        if head in _TYPE:
            return [p for a in args for p in _parts(a, True, depth + 1)]
        return []  # containers: the element type is not the value's type
    name = ast_dotted(node)
    if name and name not in ("None", "Any", "typing.Any", "object"):
        return [AnnotationPart(name, is_class_object)]
    return []


def ast_dotted(node: ast.AST | None) -> str | None:
    """``a.b.c`` for a stdlib ``ast`` Name/Attribute chain, else ``None``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = ast_dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None
