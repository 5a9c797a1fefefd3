"""Functions passed as values: arguments called by the callee, decorators, initialisers.

A call site gives its callee values; where the callee calls a parameter (``callback()``), the
function passed for it is what that call reaches. The edge is the callee's own
(``run -> on_done``, labelled ``argument``), found from the call site that binds it. A decorated
function is called through what its decorator returns: the caller reaches the wrapper, and
the wrapper calls the original (``decorator``). Calling a dataclass runs its generated
``__init__`` (the class node stands for it) and then ``__post_init__``.

>>> # def run(on_done): on_done()     run(callback=notify)   ->   run -> notify [argument]
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from sgtrace.graphs.model import CallSite
from sgtrace.graphs.summary import DefKind, FunctionInfo, ParamCall, RawCall
from sgtrace.graphs.values import ClassValue, FunctionValue, How, Values
from sgtrace.names import QualName

if TYPE_CHECKING:
    from sgtrace.graphs.resolve import Resolver


def initialisers(resolver: Resolver, cls: QualName) -> list[tuple[QualName, How | None]]:
    """What calling class ``cls`` runs: the first ``__init__`` along its MRO, or for a
    dataclass (before any explicit ``__init__``) the class itself, standing for the generated
    ``__init__``, then ``__post_init__``. ``None`` keeps the label the class was found with."""
    for owner in resolver.mro(cls):
        info = resolver.klass(owner)
        if info is None:
            continue
        if "__init__" in info.members and resolver.function(owner.child("__init__")):
            return [(owner.child("__init__"), None)]
        if info.is_dataclass:
            post = resolver.class_member(cls, "__post_init__")
            after = [(post[0], How.DATACLASS)] if post else []
            return [(cls, None), *after]
    return [(cls, None)]


def _receiving(info: FunctionInfo, key: str, is_bound: bool) -> str | None:
    """The parameter of ``info`` that argument ``key`` (a position or a keyword) binds."""
    names = [p.name for p in info.params]
    if key.isdigit():
        position = int(key) + (1 if is_bound else 0)
        return names[position] if position < len(names) else None
    return key if key in names else None


def _callee_function(resolver: Resolver, target: QualName) -> tuple[FunctionInfo, bool] | None:
    info = resolver.function(target)
    if info is not None:
        is_bound = info.kind in (DefKind.METHOD, DefKind.CLASSMETHOD, DefKind.PROPERTY)
        return info, is_bound
    member = resolver.class_member(target, "__init__") if resolver.klass(target) else None
    if member is not None and isinstance(member[1], FunctionInfo):
        return member[1], True
    return None


def passed_calls(
    resolver: Resolver, module: str, scope: str, raw: RawCall, targets: dict[QualName, How]
) -> Iterator[CallSite]:
    """The calls each callee in ``targets`` makes of the functions ``raw`` passes to it."""
    for target in sorted(targets):
        found = _callee_function(resolver, target)
        if found is None or not found[0].param_calls:
            continue
        info, is_bound = found
        defined_in = target if resolver.function(target) else _init_of(resolver, target)
        for key, expr in raw.args:
            param = _receiving(info, key, is_bound)
            calls = [c for c in info.param_calls if c.param == param]
            if not calls:
                continue
            values = resolver.evaluate(module, expr, frozenset())
            yield from _sites(resolver, defined_in, calls, values)


def _init_of(resolver: Resolver, cls: QualName) -> QualName:
    member = resolver.class_member(cls, "__init__")
    return member[0] if member else cls


def _sites(
    resolver: Resolver, defined_in: QualName, calls: list[ParamCall], values: Values
) -> Iterator[CallSite]:
    summary = resolver.summary(defined_in.module)
    if summary is None:
        return
    for call in calls:
        caller = QualName(defined_in.module, call.caller)
        text = resolver.index.line_text(defined_in.module, call.line)
        for name, how in _called(resolver, values):
            yield CallSite(summary.file, call.line, caller, name, text, None, how.value)


def _called(resolver: Resolver, values: Values) -> list[tuple[QualName, How]]:
    found: list[tuple[QualName, How]] = []
    for value in values:
        if isinstance(value, FunctionValue):
            found.append((value.name, How.ARGUMENT))
        elif isinstance(value, ClassValue):
            found.extend((n, How.ARGUMENT) for n, _ in initialisers(resolver, value.name))
    return sorted(found, key=lambda f: str(f[0]))


def decorated(resolver: Resolver, targets: dict[QualName, How]) -> list[CallSite]:
    """For each decorated function in ``targets`` whose decorator (in the source) returns a
    wrapper: the wrapper replaces it among ``targets`` (``decorator``), and the wrapper's call
    of the function it was given is returned as a call site."""
    sites: list[CallSite] = []
    for target in sorted(targets):
        info = resolver.function(target)
        if info is None or not info.decorators:
            continue
        for deco in info.decorators:
            scope = target.qualname.rpartition(".<locals>.")[0]
            name = deco.removesuffix("()")
            for value in resolver.dotted(target.module, scope, name, frozenset()):
                if isinstance(value, FunctionValue):
                    sites.extend(_wrap(resolver, value, target, targets, name != deco))
    return sites


def _wrap(
    resolver: Resolver,
    deco: FunctionValue,
    original: QualName,
    targets: dict[QualName, How],
    is_factory: bool,
) -> list[CallSite]:
    """The wrapper ``deco`` returns (through the decorator a factory returns, for
    ``@factory(...)``) and its calls of the parameter that receives ``original``."""
    taker, wrappers = deco.name, _nested_returned(resolver, deco.name)
    if is_factory:  # @factory(...): the factory returns the decorator, which returns the wrapper
        if not wrappers:
            return []
        taker, wrappers = wrappers[0], _nested_returned(resolver, wrappers[0])
    info = resolver.function(taker)
    if not wrappers or info is None or not info.params:
        return []
    targets.pop(original, None)
    for wrapper in wrappers:
        targets[wrapper] = How.DECORATOR
    calls = [c for c in info.param_calls if c.param == info.params[0].name]
    value: Values = {FunctionValue(original): How.DECORATOR}
    return [
        CallSite(s.file, s.line, s.caller, s.callee, s.text, None, How.DECORATOR.value)
        for s in _sites(resolver, taker, calls, value)
    ]


def _nested_returned(resolver: Resolver, func: QualName) -> list[QualName]:
    """The functions nested in ``func`` that it returns."""
    info = resolver.function(func)
    if info is None:
        return []
    prefix = f"{func.qualname}.<locals>."
    return sorted(
        QualName(func.module, prefix + v.text)
        for v in info.returned
        if v.text in info.nested and resolver.function(QualName(func.module, prefix + v.text))
    )
