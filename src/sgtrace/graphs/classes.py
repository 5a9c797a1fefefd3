"""Classes across modules: definitions, C3 MROs, members along the MRO, subclasses.

:class:`ClassHierarchy` is the part of the resolver that answers questions about class
hierarchies; :class:`~sgtrace.graphs.resolve.Resolver` builds on it (and provides ``dotted``,
which a class's bases are looked up with).
"""

from __future__ import annotations

from collections.abc import Hashable
from functools import lru_cache
from typing import TYPE_CHECKING

from sgtrace.graphs.summary import ClassInfo, FunctionInfo, ModuleSummary
from sgtrace.graphs.values import ClassValue, Values
from sgtrace.names import QualName

if TYPE_CHECKING:
    from sgtrace.graphs.index import SourceIndex

MAX_SUBCLASSES = 64

# A query under way, for the cycle guard: its kind ("mro", "attr", ...) and its arguments.
GuardKey = tuple[Hashable, ...]


class ClassHierarchy:
    """Definitions and class hierarchies over a :class:`SourceIndex`, memoised, cycle-safe."""

    def __init__(self, index: SourceIndex) -> None:
        self.index = index
        self._active: set[GuardKey] = set()
        self.mro = lru_cache(maxsize=None)(self._mro)

    def dotted(
        self, module: str, scope: str, text: str, self_types: frozenset[QualName], line: int = 0
    ) -> Values:
        """What the dotted name ``text`` means in ``scope`` (the resolver's lookup)."""
        raise NotImplementedError

    # -- definitions -------------------------------------------------------------------------
    def summary(self, module: str) -> ModuleSummary | None:
        return self.index.summary(module)

    def function(self, name: QualName) -> FunctionInfo | None:
        summary = self.summary(name.module)
        return summary.functions.get(name.qualname) if summary else None

    def klass(self, name: QualName) -> ClassInfo | None:
        summary = self.summary(name.module)
        return summary.classes.get(name.qualname) if summary else None

    def _guard(self, key: GuardKey) -> bool:
        if key in self._active:
            return False
        self._active.add(key)
        return True

    # -- classes ------------------------------------------------------------------------------
    def bases(self, name: QualName) -> list[QualName]:
        info = self.klass(name)
        if info is None:
            return []
        scope = name.qualname.rpartition(".<locals>.")[0]
        result = []
        for base in info.bases:
            for value in self.dotted(name.module, scope, base, frozenset()):
                if isinstance(value, ClassValue) and value.name != name:
                    result.append(value.name)
        return result

    def _mro(self, name: QualName) -> tuple[QualName, ...]:
        key = ("mro", name)
        if not self._guard(key):
            return (name,)
        try:
            return _c3(name, [list(self.mro(b)) for b in self.bases(name)])
        finally:
            self._active.discard(key)

    def class_member(
        self, cls: QualName, attr: str
    ) -> tuple[QualName, FunctionInfo | ClassInfo] | None:
        """The first definition of ``attr`` along the MRO of ``cls``."""
        for owner in self.mro(cls):
            info = self.klass(owner)
            if info is not None and attr in info.members:
                child = owner.child(attr)
                found = self.function(child) or self.klass(child)
                if found is not None:
                    return child, found
        return None

    def subclasses(self, cls: QualName) -> list[QualName]:
        """Classes in the source whose MRO contains ``cls`` (found through a textual index)."""
        found: list[QualName] = []
        frontier = [cls]
        while frontier and len(found) < MAX_SUBCLASSES:
            current = frontier.pop()
            short = current.qualname.rsplit(".", 1)[-1]
            for module, name in self.index.class_bases.get(short, []):
                candidate = QualName(module, name)
                if candidate in found or candidate == cls or self.klass(candidate) is None:
                    continue
                if cls in self.mro(candidate):
                    found.append(candidate)
                    frontier.append(candidate)
        return sorted(found)


def _c3(name: QualName, parents: list[list[QualName]]) -> tuple[QualName, ...]:
    """C3 linearisation; an inconsistent hierarchy falls back to depth-first order."""
    result = [name]
    seqs = [list(p) for p in parents if p] + [[p[0] for p in parents if p]]
    seqs = [s for s in seqs if s]
    while seqs:
        for seq in seqs:
            head = seq[0]
            if not any(head in other[1:] for other in seqs):
                break
        else:
            rest = [q for p in parents for q in p]
            return tuple(dict.fromkeys([*result, *rest]))
        result.append(head)
        seqs = [[q for q in s if q != head] for s in seqs]
        seqs = [s for s in seqs if s]
    return tuple(result)
