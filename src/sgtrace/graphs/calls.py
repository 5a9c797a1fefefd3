"""Resolve the calls of one function (or module / class body) into call sites.

A :class:`~sgtrace.graphs.summary.RawCall` is a root and a chain of attributes. The root is
looked up in the caller's scopes (closures, locals, parameters, ``self``), ``super()`` walks the
MRO past the defining class, and each attribute goes through the resolver. Calling a class links
to its ``__init__``; an abstract method also links to its overriders; a mixin's ``self.m()`` that
its own MRO lacks is looked up in the classes that mix it in.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass

from sgtrace.graphs.composite import subscript
from sgtrace.graphs.model import CallSite, Unresolved, UnresolvedCall
from sgtrace.graphs.passed import decorated, initialisers, passed_calls
from sgtrace.graphs.resolve import Resolver
from sgtrace.graphs.summary import DefKind, FunctionInfo, ModuleSummary, RawCall, RootKind
from sgtrace.graphs.values import (
    ClassValue,
    ContainerMethod,
    ExternalValue,
    FunctionValue,
    How,
    InstanceValue,
    Values,
    merge,
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
        if raw.implicit is not None:
            targets = {callee: raw.implicit for callee in targets}
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


def _targets(
    resolver: Resolver, caller: QualName, info: FunctionInfo | None, scope: str, raw: RawCall
) -> tuple[dict[QualName, How], Unresolved, str]:
    module = caller.module
    if raw.root_kind is RootKind.DYNAMIC:
        return {}, Unresolved.DYNAMIC, raw.root
    if raw.root_kind is RootKind.SUPER:
        values = _super(resolver, caller, info, raw.attrs[0] if raw.attrs else None)
    elif raw.root_kind is RootKind.CALL:
        if raw.root == "getattr" and not resolver.is_bound(module, scope, raw.root):
            return {}, Unresolved.DYNAMIC, "getattr(): an attribute named at run time"
        callees = resolver.dotted(module, scope, raw.root, frozenset(), raw.line)
        values = resolver.call_result(callees)
    elif raw.root_kind is RootKind.SUBSCRIPT:
        held = resolver.dotted(module, scope, raw.root, frozenset(), raw.line)
        values = subscript(resolver, held)
        if not values:
            return {}, Unresolved.DYNAMIC, f"{raw.root}[...]"
    else:
        values = resolver.lookup(module, scope, raw.root, frozenset(), raw.line)
        if not values:
            if resolver.is_bound(module, scope, raw.root):
                reason = Unresolved.UNKNOWN_TYPE
            elif raw.root in _BUILTINS:
                reason = Unresolved.BUILTIN
            else:
                reason = Unresolved.UNKNOWN_NAME
            return {}, reason, raw.root
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
    if not raw.attrs and raw.root_kind is RootKind.NAME and info is not None:
        if raw.root in info.locals:  # a function or class held in a local variable
            values = {
                v: How.REFERENCE
                if isinstance(v, (FunctionValue, ClassValue)) and h is not How.FACTORY
                else h
                for v, h in values.items()
            }
    return _callables(resolver, values)


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


def _callables(resolver: Resolver, values: Values) -> tuple[dict[QualName, How], Unresolved, str]:
    targets: dict[QualName, How] = {}
    external = not_callable = ""
    for value, how in values.items():
        if isinstance(value, FunctionValue):
            _add(targets, value.name, how)
            _add_overriders(resolver, targets, value)
        elif isinstance(value, ClassValue):
            for name, label in initialisers(resolver, value.name):
                _add(targets, name, how if label is None else label)
        elif isinstance(value, InstanceValue):
            member = resolver.class_member(value.name, "__call__")
            if member:
                _add(targets, member[0], how)
                for handler in sorted(value.carried, key=lambda f: str(f.name)):
                    _add(targets, handler.name, How.DISPATCH)
            else:
                not_callable = f"{value.name}.__call__"
        elif isinstance(value, ExternalValue):
            external = value.dotted
        elif isinstance(value, ContainerMethod):
            external = f"builtins.{'dict' if value.container.is_mapping else 'list'}.{value.name}"
    if targets:
        return targets, Unresolved.DYNAMIC, ""
    if external:
        return {}, Unresolved.EXTERNAL, external
    if not_callable:  # an instance of a known class that defines no __call__
        return {}, Unresolved.NO_MEMBER, not_callable
    return {}, Unresolved.UNKNOWN_TYPE, ""


def _add(targets: dict[QualName, How], name: QualName, how: How) -> None:
    merge(targets, {name: how})  # type: ignore[arg-type]


def _add_overriders(resolver: Resolver, targets: dict[QualName, How], func: FunctionValue) -> None:
    info = resolver.function(func.name)
    owner = func.name.owner
    if info is None or not info.is_abstract or owner is None:
        return
    for sub in resolver.subclasses(owner):
        member = resolver.class_member(sub, func.name.short)
        if member is not None and member[0] != func.name:
            _add(targets, member[0], How.OVERRIDE)
