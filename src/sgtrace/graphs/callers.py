"""What an unannotated parameter holds, from the calls that pass it.

``def helper(w): w.run()`` says nothing of ``w``; its callers do: where every call of
``helper`` that sgtrace resolves passes ``Worker()``, ``w`` is a ``Worker`` and ``w.run()``
links to ``Worker.run`` (labelled ``argument``). When callers pass different types, the
parameter may hold each of them (a call links to each, as an attribute assigned several types
does); a caller whose argument's type is unknown adds nothing. A callable stored from a
parameter (``self.cb = cb``) holds what the constructions pass (``Owner(on_done=self.finish)``),
so ``self.cb()`` links to ``finish``.

Callers are looked for among the call sites sgtrace has read in this run (the modules of the
graph and those loaded to resolve it), where the callee is spelled with the function's name
(or, for ``__init__``, its class's name or a subclass's, and ``super().__init__(...)`` in a
subclass); the call must resolve to the function. A name called at more than
:data:`MAX_CANDIDATES` sites, and chains of parameters typed by callers' parameters deeper
than :data:`MAX_DEPTH`, are not followed.

>>> # def helper(w): w.run()     helper(Worker())   ->   helper -> Worker.run [argument]
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from sgtrace.graphs.summary import (
    DefKind,
    FunctionInfo,
    ModuleSummary,
    RawCall,
    RootKind,
    ValueExpr,
    ValueKind,
)
from sgtrace.graphs.values import ClassValue, How, Values, merge
from sgtrace.names import MODULE_LEVEL, QualName

if TYPE_CHECKING:
    from sgtrace.graphs.resolve import Resolver

MAX_CANDIDATES = 256  # call sites spelled with the name, beyond which a name is not followed
MAX_DEPTH = 6  # parameters typed through callers' parameters, nested


class CallerIndex:
    """The callers whose calls have arguments, by the name they call (``x.run(...)``: ``run``),
    over the full summaries the source index has loaded; extended as more are loaded."""

    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver
        self.by_name: dict[str, list[tuple[str, str]]] = defaultdict(list)  # (module, caller)
        self.seen: set[str] = set()
        self.memo: dict[tuple[QualName, int], Values] = {}
        self.depth = 0
        self.loads = -1  # the index's count of loads when last refreshed

    def refresh(self) -> None:
        """Index the full summaries loaded since the last call."""
        index = self.resolver.index
        if index.loads == self.loads:
            return
        self.loads = index.loads
        for module, summary in list(index.loaded.items()):
            if summary.is_outline or module in self.seen:
                continue
            self.seen.add(module)
            for caller, calls in _scopes(summary):
                for name in dict.fromkeys(_called_name(raw) for raw in calls if raw.args):
                    self.by_name[name].append((module, caller))

    def passed(self, function: QualName, info: FunctionInfo, position: int) -> Values:
        """What the callers of ``function`` pass for its parameter number ``position``."""
        key = (function, position)
        if key in self.memo:
            return dict(self.memo[key])
        if self.depth >= MAX_DEPTH:
            return {}
        self.depth += 1
        try:
            found = self._passed(function, info, position)
        finally:
            self.depth -= 1
        self.memo[key] = found
        return dict(found)

    def _passed(self, function: QualName, info: FunctionInfo, position: int) -> Values:
        self.refresh()
        resolver = self.resolver
        names = _spellings(resolver, function)
        sites = [
            (module, caller, raw)
            for module, caller in sorted({c for n in names for c in self.by_name.get(n, ())})
            for raw in _calls_of(resolver.index.loaded[module], caller)
            if raw.args and _called_name(raw) in names
        ]
        if function.short == "__init__" and function.owner is not None:
            sites += self._super_inits(function.owner)
        if len(sites) > MAX_CANDIDATES:
            return {}
        param = info.params[position].name
        found: Values = {}
        for module, caller, raw in sites:
            is_bound = _is_bound(resolver, module, caller, raw, info)
            if is_bound is None or function not in _callees(resolver, module, caller, raw):
                continue
            expr = _argument(raw, param, position - (1 if is_bound else 0))
            if expr is None:
                continue
            if expr.kind is ValueKind.NAME:  # as it stands on the line of the call
                values = resolver.dotted(module, expr.scope, expr.text, frozenset(), raw.line)
            else:
                values = resolver.evaluate(module, expr, frozenset())
            merge(found, values, How.ARGUMENT)
        return found

    def _super_inits(self, cls: QualName) -> list[tuple[str, str, RawCall]]:
        """The ``super().__init__(...)`` calls with arguments in the ``__init__`` of the
        subclasses of ``cls``."""
        found = []
        for module, caller in sorted(set(self.by_name.get("__init__", ()))):
            owner = QualName(module, caller).owner
            if owner is None or owner == cls or cls not in self.resolver.mro(owner):
                continue
            calls = _calls_of(self.resolver.index.loaded[module], caller)
            found += [
                (module, caller, raw)
                for raw in calls
                if raw.args and raw.root_kind is RootKind.SUPER and raw.attrs == ("__init__",)
            ]
        return found


def _scopes(summary: ModuleSummary) -> list[tuple[str, tuple[RawCall, ...]]]:
    """(caller qualname, its calls) for the module level, each function and class body."""
    found = [(MODULE_LEVEL, summary.calls)]
    found.extend((q, info.calls) for q, info in summary.functions.items())
    found.extend((q, info.calls) for q, info in summary.classes.items())
    return found


def _calls_of(summary: ModuleSummary, caller: str) -> tuple[RawCall, ...]:
    if caller == MODULE_LEVEL:
        return summary.calls
    info = summary.functions.get(caller) or summary.classes.get(caller)
    return info.calls if info is not None else ()


def _called_name(raw: RawCall) -> str:
    return raw.attrs[-1] if raw.attrs else raw.root


def _spellings(resolver: Resolver, function: QualName) -> set[str]:
    """The names a call of ``function`` ends with: its own, or for ``__init__`` the names of
    its class and of the subclasses that inherit it."""
    owner = function.owner
    if function.short != "__init__" or owner is None:
        return {function.short}
    found = {owner.short}
    for sub in resolver.subclasses(owner):
        member = resolver.class_member(sub, "__init__")
        if member is not None and member[0] == function:
            found.add(sub.short)
    return found


def _callees(resolver: Resolver, module: str, caller: str, raw: RawCall) -> set[QualName]:
    from sgtrace.graphs.calls import call_targets

    return set(call_targets(resolver, QualName(module, caller), raw))


def _is_bound(
    resolver: Resolver, module: str, caller: str, raw: RawCall, info: FunctionInfo
) -> bool | None:
    """Whether the call passes ``self`` (or ``cls``) itself: a method called on an instance,
    or a class called; not ``Cls.method(obj, ...)``; ``None`` when it cannot be told (the
    receiver may be a class or an instance)."""
    if info.kind in (DefKind.FUNCTION, DefKind.STATICMETHOD):
        return False
    if info.qualname.rpartition(".")[2] == "__init__" and not raw.attrs:
        return True
    if not raw.attrs or raw.root_kind is not RootKind.NAME:
        return True if raw.root_kind in (RootKind.SUPER, RootKind.CALL) else None
    scope = caller if caller != MODULE_LEVEL else ""
    prefix = ".".join((raw.root, *raw.attrs[:-1]))
    receivers = resolver.dotted(module, scope, prefix, frozenset(), raw.line)
    if info.kind is not DefKind.METHOD or not any(isinstance(v, ClassValue) for v in receivers):
        return True
    return False if all(isinstance(v, ClassValue) for v in receivers) else None


def _argument(raw: RawCall, param: str, position: int) -> ValueExpr | None:
    """The argument ``raw`` passes for ``param``, by keyword or by ``position``."""
    for key, expr in raw.args:
        if key == param or (key.isdigit() and int(key) == position):
            return expr
    return None
