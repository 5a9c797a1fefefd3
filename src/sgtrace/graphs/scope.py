"""The shared cursor of the collection passes: where in the module a visitor stands.

``collect.py`` runs its visitors in one batched traversal; this cursor is advanced by the
traversal's ``before_visit``/``after_leave`` hooks, so every visitor sees the same scope stack
(``__qualname__`` form) and the same ordinal line numbers (see ``lines.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import libcst as cst

from sgtrace.graphs.lines import LineTable


class ScopeKind(str, Enum):
    MODULE = "module"
    CLASS = "class"
    FUNCTION = "function"


@dataclass
class Scope:
    kind: ScopeKind
    qualname: str  # "" for the module
    name: str = ""


@dataclass
class Cursor:
    """Scope stack and node ordinals during one traversal."""

    table: LineTable
    scopes: list[Scope] = field(default_factory=lambda: [Scope(ScopeKind.MODULE, "")])
    call_count: int = 0
    def_count: int = 0
    seen_call_names: list[str] = field(default_factory=list)

    @property
    def scope(self) -> Scope:
        return self.scopes[-1]

    @property
    def function(self) -> Scope | None:
        """The innermost enclosing function scope, if any."""
        for scope in reversed(self.scopes):
            if scope.kind is ScopeKind.FUNCTION:
                return scope
        return None

    def enclosing_class(self) -> Scope | None:
        """The class whose method we are in (through nested functions), if any."""
        for index in range(len(self.scopes) - 1, 0, -1):
            if self.scopes[index].kind is ScopeKind.FUNCTION and (
                self.scopes[index - 1].kind is ScopeKind.CLASS
            ):
                return self.scopes[index - 1]
        return None

    def child_qualname(self, name: str) -> str:
        parent = self.scope
        if parent.kind is ScopeKind.MODULE:
            return name
        if parent.kind is ScopeKind.CLASS:
            return f"{parent.qualname}.{name}"
        return f"{parent.qualname}.<locals>.{name}"

    def call_line(self) -> int:
        index = self.call_count - 1
        return self.table.calls[index] if index < len(self.table.calls) else 0

    def def_line(self) -> int:
        index = self.def_count - 1
        return self.table.defs[index] if index < len(self.table.defs) else 0

    def before_visit(self, node: cst.CSTNode) -> None:
        kind = type(node)
        if kind is cst.Lambda:
            self.scopes.append(Scope(ScopeKind.FUNCTION, self.child_qualname("<lambda>"), ""))
            return
        if kind is not cst.Call and kind is not cst.FunctionDef and kind is not cst.ClassDef:
            return
        # Past the exact-type test above (cheap, on every node); isinstance narrows for mypy.
        if isinstance(node, cst.Call):
            self.call_count += 1
            func = node.func
            called: object = (
                func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
            )
            self.seen_call_names.append(called if isinstance(called, str) else "")
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self.def_count += 1
            scope = ScopeKind.FUNCTION if isinstance(node, cst.FunctionDef) else ScopeKind.CLASS
            name = node.name.value
            self.scopes.append(Scope(scope, self.child_qualname(name), name))

    def after_leave(self, node: cst.CSTNode) -> None:
        kind = type(node)
        if kind is cst.FunctionDef or kind is cst.ClassDef or kind is cst.Lambda:
            self.scopes.pop()

    def is_aligned(self) -> bool:
        """Whether the ordinal table matched the traversal (see ``lines.py``)."""
        return tuple(self.seen_call_names) == self.table.call_names and self.def_count == len(
            self.table.defs
        )
