"""Name, attribute and type resolution across modules, on top of module summaries.

The :class:`Resolver` answers "what may this name / attribute / expression be?" with
:data:`~sgtrace.graphs.values.Values`. It follows imports (relative, re-exported, local to a
function, under ``TYPE_CHECKING``), computes C3 MROs over bases defined in other files, infers
attribute types from assignments in any method, class annotations and properties, and the result
types of calls (constructors, annotated returns, factories that return classes). It never
guesses by bare method name.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING

from sgtrace.graphs.callers import CallerIndex
from sgtrace.graphs.classes import ClassHierarchy
from sgtrace.graphs.composite import (
    BUILDERS,
    annotation_values,
    builtin_result,
    callables_in,
    container_call,
    container_member,
    evaluate_composite,
)
from sgtrace.graphs.spans import reaching
from sgtrace.graphs.summary import (
    ClassInfo,
    DefKind,
    FunctionInfo,
    ModuleSummary,
    ValueExpr,
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
    ModuleValue,
    Values,
    merge,
)
from sgtrace.names import QualName

if TYPE_CHECKING:
    from sgtrace.graphs.index import SourceIndex


class Resolver(ClassHierarchy):
    """Resolution queries over a :class:`SourceIndex`, memoised, cycle-safe."""

    def __init__(self, index: SourceIndex) -> None:
        super().__init__(index)
        # memo of evaluate(), by ("eval", module, expr, self_types): results reused often
        self._evaluated: dict[tuple[str, str, ValueExpr, frozenset[QualName]], Values] = {}
        self.module_member = lru_cache(maxsize=None)(self._module_member)
        self.attribute = lru_cache(maxsize=None)(self._attribute)
        self.callers = CallerIndex(self)  # what callers pass for unannotated parameters

    # -- modules and names -------------------------------------------------------------------
    def _module_member(self, module: str, name: str) -> tuple[tuple[object, How], ...]:
        key = ("member", module, name)
        if not self._guard(key):
            return ()
        try:
            return tuple(self._module_member_values(module, name).items())
        finally:
            self._active.discard(key)

    def member_of_module(self, module: str, name: str) -> Values:
        return dict(self.module_member(module, name))  # type: ignore[arg-type]

    def _module_member_values(self, module: str, name: str) -> Values:
        summary = self.summary(module)
        sub = f"{module}.{name}"
        if summary is None:
            if sub in self.index.modules:
                return {ModuleValue(sub): How.IMPORT}
            return {ExternalValue(sub, module.count(".") + 1): How.IMPORT}
        if name in summary.classes or name in summary.functions:
            return self._defined(summary, name)
        if name in summary.imports:
            return merge(
                {},
                self.imported(summary.imports[name].module, summary.imports[name].name),
                How.IMPORT,
            )
        if name in summary.names:
            return self.evaluate_all(module, summary.names[name], frozenset())
        if sub in self.index.modules:
            return {ModuleValue(sub): How.IMPORT}
        found: Values = {}
        for key, ref in summary.imports.items():
            if key.startswith("*"):
                merge(found, self.member_of_module(ref.module, name), How.IMPORT)
        return found

    def _defined(self, summary: ModuleSummary, name: str) -> Values:
        """A class or function defined at module level; an import of the same name binds it
        too where the two are alternatives (``if mps: from m import N`` / ``else: class N:``),
        not where the class extends what the import bound (``class N(N)``)."""
        own = QualName(summary.module, name)
        klass = summary.classes.get(name)
        found: Values = {ClassValue(own) if klass else FunctionValue(own): How.LOCAL}
        ref = summary.imports.get(name)
        if ref is not None and (klass is None or name not in klass.bases):
            merge(found, self.imported(ref.module, ref.name), How.IMPORT)
        return found

    def imported(self, module: str, name: str | None) -> Values:
        """What ``import module`` / ``from module import name`` binds."""
        if name is None:
            if module in self.index.modules:
                return {ModuleValue(module): How.IMPORT}
            return {ExternalValue(module, module.count(".") + 1): How.IMPORT}
        return self.member_of_module(module, name)

    def scopes(self, module: str, scope: str) -> Iterator[FunctionInfo]:
        """The function scope ``scope`` and the functions enclosing it, innermost first."""
        summary = self.summary(module)
        while summary is not None and scope:
            info = summary.functions.get(scope)
            if info is not None:
                yield info
            head, sep, _ = scope.rpartition(".<locals>.")
            scope = head if sep else ""

    def lookup(
        self, module: str, scope: str, name: str, self_types: frozenset[QualName], line: int = 0
    ) -> Values:
        """What the bare ``name`` means inside function ``scope`` of ``module``; with ``line``,
        a local holds what the assignments that reach that line of ``scope`` gave it."""
        for info in self.scopes(module, scope):
            found = self._in_function(module, info, name, self_types, line)
            if found is not None:
                return found
            line = 0  # lines of an enclosing function say nothing of when a closure runs
        return self.member_of_module(module, name)

    def is_bound(self, module: str, scope: str, name: str) -> bool:
        """Whether ``name`` is a parameter or local of ``scope`` or an enclosing function."""
        return any(
            name in info.locals or any(p.name == name for p in info.params)
            for info in self.scopes(module, scope)
        )

    def _in_function(
        self,
        module: str,
        info: FunctionInfo,
        name: str,
        self_types: frozenset[QualName],
        line: int = 0,
    ) -> Values | None:
        if name in info.nested:
            child = f"{info.qualname}.<locals>.{name}"
            summary = self.summary(module)
            if summary is not None and child in summary.classes:
                return {ClassValue(QualName(module, child)): How.CLOSURE}
            return {FunctionValue(QualName(module, child)): How.CLOSURE}
        if name in info.imports:
            ref = info.imports[name]
            return merge({}, self.imported(ref.module, ref.name), How.IMPORT)
        for position, param in enumerate(info.params):
            if param.name == name:
                return self._param(module, info, position, self_types)
        if name in info.locals:
            if line and name in info.bindings:
                held = [v for b in reaching(info.bindings[name], line) for v in b.values]
                found = self.evaluate_all(module, tuple(held), self_types)
                if found:
                    return found
            return self.evaluate_all(module, info.locals[name], self_types)
        return None

    def _param(
        self, module: str, info: FunctionInfo, position: int, self_types: frozenset[QualName]
    ) -> Values:
        param = info.params[position]
        owner = QualName(module, info.qualname).owner
        is_method = info.kind in (DefKind.METHOD, DefKind.PROPERTY, DefKind.CLASSMETHOD)
        if position == 0 and is_method and owner is not None and self.klass(owner) is not None:
            if param.annotation:  # `self: Scheduler` in a mixin
                return self.annotation(module, info.qualname, param.annotation, frozenset())
            receivers = self_types or frozenset({owner})
            make = ClassValue if info.kind is DefKind.CLASSMETHOD else InstanceValue
            return {make(r): How.MRO for r in sorted(receivers)}
        if param.annotation:
            return self.annotation(module, info.qualname, param.annotation, frozenset())
        return self.callers.passed(QualName(module, info.qualname), info, position)

    # -- types --------------------------------------------------------------------------------
    def annotation(
        self, module: str, scope: str, text: str, self_types: frozenset[QualName]
    ) -> Values:
        return annotation_values(self, module, scope, text, self_types)

    def evaluate_all(
        self, module: str, exprs: tuple[ValueExpr, ...], self_types: frozenset[QualName]
    ) -> Values:
        found: Values = {}
        for expr in exprs:
            merge(found, self.evaluate(module, expr, self_types))
        if len(exprs) > 1 and any(e.kind is ValueKind.ANNOTATION for e in exprs):
            return self._narrowed(module, exprs, self_types, found)
        return found

    def _narrowed(
        self,
        module: str,
        exprs: tuple[ValueExpr, ...],
        self_types: frozenset[QualName],
        found: Values,
    ) -> Values:
        """``x: Sub = base_typed_value``: the declared class narrows an inferred base class
        (the base's own methods are not what a call on ``x`` reaches)."""
        declared = [
            v.name
            for e in exprs
            if e.kind is ValueKind.ANNOTATION
            for v in self.evaluate(module, e, self_types)
            if isinstance(v, (ClassValue, InstanceValue))
        ]
        return {
            v: h
            for v, h in found.items()
            if not isinstance(v, (ClassValue, InstanceValue))
            or not any(v.name != d and v.name in self.mro(d) for d in declared)
        }

    def evaluate(self, module: str, expr: ValueExpr, self_types: frozenset[QualName]) -> Values:
        """The values ``expr`` may have; ``self_types`` is the class of ``self``, if known."""
        key = ("eval", module, expr, self_types)
        done = self._evaluated.get(key)
        if done is not None:
            return dict(done)
        if not self._guard(key):
            return {}
        try:
            found = self._evaluate(module, expr, self_types)
            self._evaluated[key] = found
            return dict(found)
        finally:
            self._active.discard(key)

    def _evaluate(self, module: str, expr: ValueExpr, self_types: frozenset[QualName]) -> Values:
        if expr.kind is ValueKind.ANNOTATION:
            return self.annotation(module, expr.scope, expr.text, self_types)
        if expr.kind is ValueKind.SELF_ATTR:
            receivers = self.lookup(module, expr.scope, "self", self_types)
            return self.members(receivers, expr.text)
        if expr.kind is ValueKind.NAME:
            return self.dotted(module, expr.scope, expr.text, self_types)
        if expr.kind is ValueKind.CALL:
            return self._call_value(module, expr, self_types)
        return evaluate_composite(self, module, expr, self_types)

    def dotted(
        self, module: str, scope: str, text: str, self_types: frozenset[QualName], line: int = 0
    ) -> Values:
        head, *rest = text.split(".")
        values = self.lookup(module, scope, head, self_types, line)
        for attr in rest:
            values = self.members(values, attr)
        return values

    def _call_value(self, module: str, expr: ValueExpr, self_types: frozenset[QualName]) -> Values:
        callee = self.dotted(module, expr.scope, expr.text, self_types)
        if not expr.inner:
            return self.call_result(callee)
        short = expr.text.rsplit(".", 1)[-1]
        if not callee or all(isinstance(v, ExternalValue) for v in callee):
            if short == "partial":  # functools.partial(f, ...) calls f
                return merge({}, self.evaluate(module, expr.inner[0], self_types), How.REFERENCE)
            if short in BUILDERS:
                args = [self.evaluate(module, a, self_types) for a in expr.inner]
                built = builtin_result(self, short, args)
                return built if built is not None else {}
        carried: frozenset[Handler] = frozenset()
        if any(
            isinstance(v, ClassValue) and self.class_member(v.name, "__call__") for v in callee
        ):  # an object that calls what it was given: a dispatcher
            args = [self.evaluate(module, a, self_types) for a in expr.inner]
            carried = frozenset(f for a in args for f in callables_in(a))
        return self.call_result(callee, carried)

    def call_result(self, callees: Values, carried: frozenset[Handler] = frozenset()) -> Values:
        """What calling each of ``callees`` returns; an instance keeps ``carried``, the
        functions given to its constructor (a dispatcher's handlers)."""
        found: Values = {}
        for value, how in callees.items():
            if isinstance(value, ClassValue):
                merge(found, {InstanceValue(value.name, carried): how})
            elif isinstance(value, FunctionValue):
                merge(found, self.returns(value), how)
            elif isinstance(value, ContainerMethod):
                merge(found, container_call(value))
            elif isinstance(value, InstanceValue):
                member = self.class_member(value.name, "__call__")
                if member is not None:
                    merge(found, self.returns(FunctionValue(member[0], value.name)), how)
        return found

    def returns(self, func: FunctionValue) -> Values:
        info = self.function(func.name)
        if info is None:
            return {}
        self_types = frozenset({func.receiver}) if func.receiver else frozenset()
        inferred = self.evaluate_all(func.name.module, info.returned, self_types)
        if any(isinstance(v, ClassValue) for v in inferred):  # a factory returning classes
            return {v: How.FACTORY if isinstance(v, ClassValue) else h for v, h in inferred.items()}
        declared = (
            self.annotation(func.name.module, info.qualname, info.returns, self_types)
            if info.returns
            else {}
        )
        return self.refine(inferred, declared)

    def refine(self, inferred: Values, declared: Values) -> Values:
        """Inferred values, plus each declared type that no inferred class refines: a declared
        abstract base gives way to the concrete subclass actually assigned or returned."""
        found = dict(inferred)
        concrete = [v.name for v in inferred if isinstance(v, (ClassValue, InstanceValue))]
        for value, how in declared.items():
            if found.get(value) is How.ARGUMENT:  # declared as callers pass it: a declaration
                found[value] = how
            elif isinstance(value, (ClassValue, InstanceValue)) and any(
                value.name in self.mro(c) for c in concrete
            ):
                continue
            merge(found, {value: how})
        return found

    def _attribute(self, cls: QualName, attr: str) -> tuple[tuple[object, How], ...]:
        """Types of the data attribute ``attr`` on instances of ``cls``: assignments in any
        method along the MRO win over declarations (they refine an abstract declared type)."""
        key = ("attr", cls, attr)
        if not self._guard(key):
            return ()
        try:
            assigned: Values = {}
            declared: Values = {}
            receivers = frozenset({cls})
            for owner in self.mro(cls):
                info = self.klass(owner)
                if info is None:
                    continue
                if attr in info.assigned:
                    merge(
                        assigned,
                        self.evaluate_all(owner.module, info.assigned[attr], receivers),
                        How.ATTRIBUTE_TYPE,
                    )
                if attr in info.annotations:
                    scope = owner.qualname.rpartition(".<locals>.")[0]
                    merge(
                        declared,
                        self.annotation(owner.module, scope, info.annotations[attr], receivers),
                    )
            return tuple(self.refine(assigned, declared).items())
        finally:
            self._active.discard(key)

    def members(self, values: Values, attr: str) -> Values:
        """What ``value.attr`` may be for each of ``values``."""
        found: Values = {}
        for value, how in values.items():
            if isinstance(value, ModuleValue):
                merge(found, self.member_of_module(value.name, attr), how)
            elif isinstance(value, ExternalValue):
                merge(found, {value.member(attr): how})
            elif isinstance(value, (ClassValue, InstanceValue)):
                merge(found, self._class_attr(value, attr, how))
            elif isinstance(value, ContainerValue):
                merge(found, container_member(value, attr))
        return found

    def _class_attr(self, value: ClassValue | InstanceValue, attr: str, how: How) -> Values:
        member = self.class_member(value.name, attr)
        if member is None:  # a data attribute (a class attribute too, through the class)
            return merge({}, dict(self.attribute(value.name, attr)), how)  # type: ignore[arg-type]
        name, info = member
        if isinstance(info, ClassInfo):
            return {ClassValue(name): how}
        if info.kind is DefKind.PROPERTY and isinstance(value, InstanceValue):
            return merge({}, self.returns(FunctionValue(name, value.name)), How.PROPERTY)
        receiver = (
            value.name
            if isinstance(value, InstanceValue) or info.kind is DefKind.CLASSMETHOD
            else None
        )
        return {FunctionValue(name, receiver): how}
