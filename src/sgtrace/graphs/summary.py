"""What one parsed module says, before anything is resolved across files.

A :class:`ModuleSummary` is the product of the collection passes over one file (see
``collect.py``). It holds names as they are written (dotted text) plus the imports that give them
meaning, so that resolution (``resolve.py``) can later follow them into other modules. Summaries
are plain frozen data: the on-disk cache keeps them as checked JSON (``codec.py``), keyed by
the file's content hash; that encoding follows the dataclasses' fields, whatever they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import cache

from sgtrace.graphs.values import How


class DefKind(str, Enum):
    """What a definition is."""

    MODULE = "module"
    CLASS = "class"
    FUNCTION = "function"
    METHOD = "method"
    PROPERTY = "property"
    STATICMETHOD = "staticmethod"
    CLASSMETHOD = "classmethod"


KIND_BY_DECORATOR = {
    "property": DefKind.PROPERTY,
    "functools.cached_property": DefKind.PROPERTY,
    "cached_property": DefKind.PROPERTY,
    "staticmethod": DefKind.STATICMETHOD,
    "classmethod": DefKind.CLASSMETHOD,
}  # a method's kind by its decorator, shared by both collection passes


class ValueKind(str, Enum):
    """How a value expression is written, for type inference."""

    NAME = "name"  # a (dotted) name: `Cls`, `mod.Cls`, `param`
    CALL = "call"  # the result of calling a (dotted) callee: `Cls(...)`, `factory(...)`
    SELF_ATTR = "self_attr"  # `self.attr`
    ANNOTATION = "annotation"  # a declared type, as written: `Optional[Foo]`
    CALL_OF = "call_of"  # calling inner[0]'s value: `self.get_class()(...)`, `table[k](...)`
    ELEMENT = "element"  # an element of iterating inner[0]: `for x in xs` ("async": `async for`)
    ITEM = "item"  # position int(text) of inner[0]: `a, b = pair`
    SUBSCRIPT = "subscript"  # inner[0][key]: a mapping's value, a sequence's element
    CONTAINER = "container"  # a literal: text is "tuple" (positional inner), "list" or "dict"
    LAMBDA = "lambda"  # a lambda expression; text is its qualname (`f.<locals>.<lambda>`)
    ENTERED = "entered"  # what `with inner[0] as x` binds: `__enter__`'s ("async": `__aenter__`'s)
    MEMBER = "member"  # attribute text of inner[0]'s value: `make().attr`, `f().m(...)`


@dataclass(frozen=True, slots=True)
class ValueExpr:
    """A right-hand side the inference understands, e.g. ``ValueExpr(CALL, "EagleDraftWorker")``.

    ``scope`` is the qualified name (within the module) of the function whose names it uses;
    empty for module level. Composite forms hold their operands in ``inner``:
    ``for req in batch.reqs`` binds ``ValueExpr(ELEMENT, "", f, (ValueExpr(NAME, "batch.reqs"),))``.
    """

    kind: ValueKind
    text: str
    scope: str = ""
    inner: tuple[ValueExpr, ...] = ()  # operands; for CALL, the arguments that name values

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        """Pickled (from a parse worker) with its strings shared on arrival: see :func:`shared`."""
        return _value_expr, (self.kind, self.text, self.scope, self.inner)


@dataclass(frozen=True, slots=True)
class ImportRef:
    """What an imported local name refers to: ``module`` and, for ``from m import n``, ``name``."""

    module: str
    name: str | None = None


class RootKind(str, Enum):
    """The start of a callee chain."""

    NAME = "name"  # foo(...), mod.func(...), obj.method(...)
    SUPER = "super"  # super().m(...)
    CALL = "call"  # factory(...).m(...): the root is the result of a call
    SUBSCRIPT = "subscript"  # table[key](...).m(...): the root is an item of `root`
    DYNAMIC = "dynamic"  # subscripts, lambdas, literals: not resolvable statically


@dataclass(frozen=True, slots=True)
class RawCall:
    """A call site as written: ``root`` then attribute names, e.g. self.draft_worker.draft."""

    line: int
    root_kind: RootKind
    root: str
    attrs: tuple[str, ...]
    guard: str | None = None
    args: tuple[tuple[str, ValueExpr], ...] = ()  # (position or keyword, value) naming values
    implicit: How | None = None  # a call without a call expression (`with`, `for`, `@deco`),
    # labelled so; kept only when it resolves

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        """Pickled (from a parse worker) with its strings shared on arrival: see :func:`shared`."""
        fields = (self.root_kind, self.root, self.attrs, self.guard, self.args, self.implicit)
        return _raw_call, (self.line, *fields)

    @property
    def spelled(self) -> str:
        """The callee as written, for messages: ``self.draft_worker.draft``."""
        head = {
            RootKind.SUPER: "super()",
            RootKind.CALL: f"{self.root}(...)",
            RootKind.SUBSCRIPT: f"{self.root}[...]",
        }.get(self.root_kind, self.root)
        return ".".join((head, *self.attrs))


@cache
def shared(value: str | tuple[str, ...]) -> str | tuple[str, ...]:
    """The first equal ``value`` seen in this process. A parse worker's summaries arrive
    pickled, batch by batch, each with its own copy of every name, guard and attribute chain:
    on a whole package, most are repeats (0.5.9: 96 thousand distinct strings of 340 thousand,
    9 thousand distinct attribute chains of 131 thousand), and sharing them keeps one."""
    return value


def _value_expr(kind: ValueKind, text: str, scope: str, inner: tuple[ValueExpr, ...]) -> ValueExpr:
    return ValueExpr(kind, shared(text), shared(scope), inner)  # type: ignore[arg-type]


def _raw_call(
    line: int,
    kind: RootKind,
    root: str,
    attrs: tuple[str, ...],
    guard: str | None,
    args: tuple[tuple[str, ValueExpr], ...],
    implicit: How | None,
) -> RawCall:
    return RawCall(
        line,
        kind,
        shared(root),  # type: ignore[arg-type]
        shared(attrs),  # type: ignore[arg-type]
        guard if guard is None else shared(guard),  # type: ignore[arg-type]
        args,
        implicit,
    )


@dataclass(frozen=True, slots=True)
class Param:
    """A parameter and its annotation text, if any."""

    name: str
    annotation: str | None = None


@dataclass(frozen=True, slots=True)
class Binding:
    """One assignment of a local name: its line, the lines of the block it sits in, and what it
    may hold. A later binding whose block encloses a use hides the earlier ones from it."""

    line: int
    block: tuple[int, int]
    values: tuple[ValueExpr, ...] = ()


@dataclass(frozen=True, slots=True)
class ParamCall:
    """A call of a parameter's value, ``param(...)`` on ``line`` inside ``caller`` (the
    function itself or a function nested in it, such as a decorator's wrapper)."""

    param: str
    line: int
    caller: str


@dataclass(frozen=True)
class FunctionInfo:
    """A function or method definition (qualname in ``__qualname__`` form)."""

    qualname: str
    line: int
    kind: DefKind
    params: tuple[Param, ...] = ()
    returns: str | None = None
    returned: tuple[ValueExpr, ...] = ()
    is_abstract: bool = False
    calls: tuple[RawCall, ...] = ()
    locals: dict[str, tuple[ValueExpr, ...]] = field(default_factory=dict)
    imports: dict[str, ImportRef] = field(default_factory=dict)
    nested: tuple[str, ...] = ()  # names of functions and classes defined directly inside
    decorators: tuple[str, ...] = ()  # outermost first; `register()` for `@register("x")`
    bindings: dict[str, tuple[Binding, ...]] = field(default_factory=dict)
    param_calls: tuple[ParamCall, ...] = ()


@dataclass(frozen=True)
class ClassInfo:
    """A class definition: bases as written, declared and assigned attributes, members."""

    qualname: str
    line: int
    bases: tuple[str, ...] = ()
    annotations: dict[str, str] = field(default_factory=dict)
    assigned: dict[str, tuple[ValueExpr, ...]] = field(default_factory=dict)  # self.x = ...
    members: tuple[str, ...] = ()  # method and nested class names
    calls: tuple[RawCall, ...] = ()  # calls in the class body itself
    is_dataclass: bool = False  # @dataclass: calling it runs a generated __init__


@dataclass(frozen=True)
class ModuleSummary:
    """Everything collected from one module."""

    module: str
    file: str  # relative to the source root, with '/' separators
    is_package: bool
    imports: dict[str, ImportRef] = field(default_factory=dict)
    names: dict[str, tuple[ValueExpr, ...]] = field(default_factory=dict)  # X = ... at top
    functions: dict[str, FunctionInfo] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    calls: tuple[RawCall, ...] = ()  # calls made at module level
    parse_error: str | None = None
    is_outline: bool = False  # definitions only (the cheap index pass): no call sites

    @property
    def top_level(self) -> set[str]:
        """Names bound at module level by definitions (not imports or assignments)."""
        return {q for q in (*self.functions, *self.classes) if "." not in q}


def freeze_values(mapping: dict[str, list[ValueExpr]]) -> dict[str, tuple[ValueExpr, ...]]:
    """Name -> values collected in a pass, frozen: sorted by name, duplicates dropped, order kept."""
    return {key: tuple(dict.fromkeys(values)) for key, values in sorted(mapping.items())}


@dataclass(frozen=True)
class Gathered:
    """What a collection pass gathered per scope (qualname; ``""`` is module level)."""

    imports: Mapping[str, Mapping[str, ImportRef]]
    locals: Mapping[str, dict[str, list[ValueExpr]]]
    assigned: Mapping[str, dict[str, list[ValueExpr]]]
    returned: Mapping[str, Sequence[ValueExpr]]
    members: Mapping[str, Sequence[str]]
    annotations: Mapping[str, Mapping[str, str]]
    calls: Mapping[str, Sequence[RawCall]] = field(default_factory=dict)
    bindings: Mapping[str, Mapping[str, Sequence[Binding]]] = field(default_factory=dict)
    param_calls: Mapping[str, Sequence[ParamCall]] = field(default_factory=dict)


def assemble_summary(
    module: str,
    file: str,
    is_package: bool,
    functions: Mapping[str, FunctionInfo],
    classes: Mapping[str, ClassInfo],
    gathered: Gathered,
    is_outline: bool = False,
) -> ModuleSummary:
    """The :class:`ModuleSummary` of bare definitions plus what was gathered for each scope;
    both collection passes (libcst in ``collect.py``, ``ast`` in ``outline.py``) end here."""
    g = gathered
    return ModuleSummary(
        module=module,
        file=file,
        is_package=is_package,
        imports=dict(g.imports.get("", {})),
        names=freeze_values(g.locals.get("", {})),
        functions={
            q: replace(
                info,
                returned=tuple(dict.fromkeys(g.returned.get(q, ()))),
                calls=tuple(g.calls.get(q, ())),
                locals=freeze_values(g.locals.get(q, {})),
                imports=dict(g.imports.get(q, {})),
                nested=tuple(g.members.get(q, ())),
                bindings={k: tuple(v) for k, v in sorted(g.bindings.get(q, {}).items())},
                param_calls=tuple(dict.fromkeys(g.param_calls.get(q, ()))),
            )
            for q, info in functions.items()
        },
        classes={
            q: replace(
                info,
                annotations=dict(g.annotations.get(q, {})),
                assigned=freeze_values(g.assigned.get(q, {})),
                members=tuple(dict.fromkeys(g.members.get(q, ()))),
                calls=tuple(g.calls.get(q, ())),
            )
            for q, info in classes.items()
        },
        calls=tuple(g.calls.get("", ())),
        is_outline=is_outline,
    )
