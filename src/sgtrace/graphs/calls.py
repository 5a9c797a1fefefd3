"""Resolve the calls of one function (or module / class body) into call sites.

A :class:`~sgtrace.graphs.summary.RawCall` is a root and a chain of attributes. The root is
looked up in the caller's scopes (closures, locals, parameters, ``self``), ``super()`` walks the
MRO past the defining class, and each attribute goes through the resolver. Calling a class links
to its ``__init__``; an abstract method also links to its overriders; a mixin's ``self.m()`` that
its own MRO lacks is looked up in the classes that mix it in.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass

from sgtrace.graphs.composite import subscript
from sgtrace.graphs.model import CallSite, Unresolved, UnresolvedCall
from sgtrace.graphs.passed import decorated, initialisers, passed_calls
from sgtrace.graphs.resolve import Resolver
from sgtrace.graphs.summary import (
    DefKind,
    FunctionInfo,
    ModuleSummary,
    RawCall,
    RootKind,
    ValueKind,
)
from sgtrace.graphs.values import (
    ClassValue,
    ContainerMethod,
    ContainerValue,
    ExternalValue,
    FunctionValue,
    Handler,
    How,
    InstanceValue,
    Values,
    merge,
    says_more,
)
from sgtrace.names import MODULE_LEVEL, QualName

_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class Resolution:
    sites: tuple[CallSite, ...]
    unresolved: tuple[UnresolvedCall, ...]


def caller_calls(summary: ModuleSummary, caller: QualName) -> tuple[RawCall, ...]:
    if caller.qualname == MODULE_LEVEL:
        return summary.calls
    info = summary.functions.get(caller.qualname) or summary.classes.get(caller.qualname)
    return info.calls if info is not None else ()


def resolve_calls(resolver: Resolver, caller: QualName) -> Resolution:
    """The resolved and unresolved calls made directly by ``caller``."""
    summary = resolver.index.full_summary(caller.module)
    if summary is None:
        return Resolution((), ())
    info = summary.functions.get(caller.qualname)
    scope = caller.qualname if info is not None else ""
    sites: list[CallSite] = []
    unresolved: list[UnresolvedCall] = []
    for raw in caller_calls(summary, caller):
        targets, reason, detail = _targets(resolver, caller, info, scope, raw)
        if raw.implicit is not None:  # only the source's own methods and decorators
            targets = {c: raw.implicit for c, h in targets.items() if h is not How.EXTERNAL}
        sites.extend(decorated(resolver, targets))
        text = resolver.index.line_text(caller.module, raw.line) if targets else ""
        for callee, how in sorted(targets.items(), key=lambda kv: str(kv[0])):
            sites.append(
                CallSite(summary.file, raw.line, caller, callee, text, raw.guard, how.value)
            )
        if targets and raw.args:
            sites.extend(passed_calls(resolver, caller.module, scope, raw, targets))
        if not targets and raw.implicit is None:
            unresolved.append(
                UnresolvedCall(summary.file, raw.line, caller, raw.spelled, reason, detail)
            )
    return Resolution(tuple(sites), tuple(unresolved))


def call_targets(resolver: Resolver, caller: QualName, raw: RawCall) -> dict[QualName, How]:
    """The callees of ``raw``, a call written in ``caller``."""
    summary = resolver.index.full_summary(caller.module)
    info = summary.functions.get(caller.qualname) if summary is not None else None
    scope = caller.qualname if info is not None else ""
    return _targets(resolver, caller, info, scope, raw)[0]


def _targets(
    resolver: Resolver, caller: QualName, info: FunctionInfo | None, scope: str, raw: RawCall
) -> tuple[dict[QualName, How], Unresolved, str]:
    values, reason, detail = _root(resolver, caller, info, scope, raw)
    if not values:
        return {}, reason, detail
    for position, attr in enumerate(raw.attrs):
        found = resolver.members(values, attr)
        # a mixin's self.m() defined by the class that mixes it in; not for a data attribute
        # the class itself assigns (its type is merely unknown)
        if (
            not found
            and position == 0
            and raw.root == "self"
            and info is not None
            and not _declares(resolver, values, attr)
        ):
            found = _via_subclasses(resolver, values, attr)
        if not found and any(isinstance(v, ContainerValue) for v in values):
            return {}, Unresolved.BUILTIN, f"{raw.spelled}: a method of a builtin container"
        if not found:
            external = any(isinstance(v, ExternalValue) for v in values)
            reason = (
                Unresolved.EXTERNAL
                if external
                else (
                    Unresolved.NO_MEMBER
                    if values and not _declares(resolver, values, attr)
                    else Unresolved.UNKNOWN_TYPE
                )
            )
            return {}, reason, ".".join((raw.root, *raw.attrs[: position + 1]))
        values = found
    if not raw.attrs and raw.root_kind is RootKind.NAME and info and raw.root in info.locals:
        values = {v: _held(v, h) for v, h in values.items()}  # a callable held in a local
    return _callables(resolver, values, lambda: _first_argument(resolver, caller.module, raw))


def _first_argument(resolver: Resolver, module: str, raw: RawCall) -> Values:
    """The values of ``raw``'s first positional argument, as they stand on its line; empty
    when it is not written as a name, a ``self`` attribute or a call."""
    expr = next((e for key, e in raw.args if key == "0"), None)
    if expr is None:
        return {}
    if expr.kind is ValueKind.NAME:
        return resolver.dotted(module, expr.scope, expr.text, frozenset(), raw.line)
    return resolver.evaluate(module, expr, frozenset())


def _held(value: object, how: How) -> How:
    if isinstance(value, (FunctionValue, ClassValue)) and how is not How.FACTORY:
        return How.REFERENCE
    return how


def _root(
    resolver: Resolver, caller: QualName, info: FunctionInfo | None, scope: str, raw: RawCall
) -> tuple[Values, Unresolved, str]:
    """What the root of ``raw``'s callee chain may be, or why nothing."""
    module = caller.module
    kind = raw.root_kind
    if kind is RootKind.DYNAMIC:
        return {}, Unresolved.DYNAMIC, raw.root
    if kind is RootKind.SUPER:
        values = _super(resolver, caller, info, raw.attrs[0] if raw.attrs else None)
        return values, Unresolved.UNKNOWN_TYPE, "super()"
    if kind is RootKind.CALL and raw.root == "getattr":
        if not resolver.is_bound(module, scope, raw.root):
            return {}, Unresolved.DYNAMIC, "getattr(): an attribute named at run time"
    values = resolver.dotted(module, scope, raw.root, frozenset(), raw.line)
    if kind is RootKind.CALL:
        return resolver.call_result(values), Unresolved.UNKNOWN_TYPE, raw.root
    if kind is RootKind.SUBSCRIPT:
        return subscript(resolver, values), Unresolved.DYNAMIC, f"{raw.root}[...]"
    if resolver.is_bound(module, scope, raw.root):
        return values, Unresolved.UNKNOWN_TYPE, raw.root
    return (
        values,
        Unresolved.BUILTIN if raw.root in _BUILTINS else Unresolved.UNKNOWN_NAME,
        raw.root,
    )


def _super(
    resolver: Resolver, caller: QualName, info: FunctionInfo | None, attr: str | None
) -> Values:
    owner = caller.owner
    if info is None or owner is None or resolver.klass(owner) is None:
        return {}
    after = resolver.mro(owner)[1:]
    make = ClassValue if info.kind in (DefKind.CLASSMETHOD, DefKind.STATICMETHOD) else InstanceValue
    # `super().attr` is the first class after `owner` in owner's MRO that defines `attr` (the
    # next class's own MRO may differ: with Leaf(Left, Right), Left's MRO skips Right)
    for cls in after:
        klass = resolver.klass(cls)
        if attr is not None and klass is not None and attr in klass.members:
            return {make(cls): How.SUPER}
    return {make(cls): How.SUPER for cls in after[:1]}


def _declares(resolver: Resolver, receivers: Values, attr: str) -> bool:
    """Whether a receiver's class assigns or annotates the data attribute ``attr``: the member
    exists and only its type is unknown (``self.model = model`` with ``model`` unannotated)."""
    for value in receivers:
        if isinstance(value, InstanceValue):
            for cls in resolver.mro(value.name):
                info = resolver.klass(cls)
                if info is not None and (attr in info.assigned or attr in info.annotations):
                    return True
    return False


def _via_subclasses(resolver: Resolver, receivers: Values, attr: str) -> Values:
    found: Values = {}
    for value in receivers:
        if isinstance(value, InstanceValue):
            for sub in resolver.subclasses(value.name):
                merge(
                    found, resolver.members({InstanceValue(sub): How.SUBCLASS}, attr), How.SUBCLASS
                )
    return found


def _callables(
    resolver: Resolver, values: Values, argument: Callable[[], Values]
) -> tuple[dict[QualName, How], Unresolved, str]:
    """The callees of calling each of ``values`` (with ``argument()``, the first argument's
    values); the source's own code hides external nodes found with it. With no callee, why
    (a reason and its detail)."""
    targets: dict[QualName, How] = {}
    missing: dict[Unresolved, str] = {}
    for value, how in values.items():
        _add_callable(resolver, targets, missing, value, how, argument)
    own: dict[QualName, How] = {n: h for n, h in targets.items() if h is not How.EXTERNAL}
    if own or targets:
        return own or targets, Unresolved.DYNAMIC, ""
    for reason in (Unresolved.NO_MEMBER, Unresolved.BUILTIN):
        if reason in missing:
            return {}, reason, missing[reason]
    return {}, Unresolved.UNKNOWN_TYPE, ""


def _add_callable(
    resolver: Resolver,
    targets: dict[QualName, How],
    missing: dict[Unresolved, str],
    value: object,
    how: How,
    argument: Callable[[], Values],
) -> None:
    if isinstance(value, FunctionValue):
        _add(targets, value.name, how)
        _add_overriders(resolver, targets, value)
    elif isinstance(value, ClassValue):
        for name, label in initialisers(resolver, value.name):
            _add(targets, name, how if label is None else label)
    elif isinstance(value, InstanceValue):
        if not _called_object(resolver, targets, value, how, argument):
            missing[Unresolved.NO_MEMBER] = f"{value.name}.__call__"  # defines no __call__
    elif isinstance(value, ExternalValue):
        _add(targets, value.node, How.EXTERNAL)
    elif isinstance(value, ContainerMethod):
        kind = "dict" if value.container.is_mapping else "list"
        missing[Unresolved.BUILTIN] = f"{kind}.{value.name}"


def _called_object(
    resolver: Resolver,
    targets: dict[QualName, How],
    value: InstanceValue,
    how: How,
    argument: Callable[[], Values],
) -> bool:
    """Calling an instance calls its ``__call__`` and, for a dispatcher, the functions it was
    given (``dispatch``): those registered for the argument's type when it is known and some
    are, else all of them. ``False`` when its class defines no ``__call__``."""
    member = resolver.class_member(value.name, "__call__")
    if member is None:
        return False
    _add(targets, member[0], how)
    handlers = value.carried
    if any(h.keys for h in handlers):
        handlers = _registered_for(resolver, handlers, argument())
    for handler in sorted(handlers, key=lambda h: str(h.function.name)):
        _add(targets, handler.function.name, How.DISPATCH)
    return True


def _registered_for(
    resolver: Resolver, handlers: frozenset[Handler], argument: Values
) -> frozenset[Handler]:
    """The handlers whose classes an argument of type ``argument`` may be an instance of (a
    subclass of the argument's class too: the static type is a bound); all of them when the
    argument's type is unknown or matches no registered class."""
    if not argument or not all(isinstance(v, InstanceValue) for v in argument):
        return handlers
    classes = [v.name for v in argument if isinstance(v, InstanceValue)]

    def fits(handler: Handler) -> bool:
        return any(
            key in resolver.mro(cls) or cls in resolver.mro(key)
            for key in handler.keys
            for cls in classes
        )

    if not any(h.keys and fits(h) for h in handlers):
        return handlers
    return frozenset(h for h in handlers if not h.keys or fits(h))


def _add(targets: dict[QualName, How], name: QualName, how: How) -> None:
    """Add a callee, keeping the more specific ``how`` (as :func:`merge` does for values)."""
    old = targets.get(name)
    if old is None or says_more(how, old):
        targets[name] = how


def _add_overriders(resolver: Resolver, targets: dict[QualName, How], func: FunctionValue) -> None:
    info = resolver.function(func.name)
    owner = func.name.owner
    if info is None or not info.is_abstract or owner is None:
        return
    for sub in resolver.subclasses(owner):
        member = resolver.class_member(sub, func.name.short)
        if member is not None and member[0] != func.name:
            _add(targets, member[0], How.OVERRIDE)
