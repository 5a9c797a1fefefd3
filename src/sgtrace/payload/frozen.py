"""Frozen values made cheaply on the hook's hot path: built or replaced without their
``__init__``, and properties computed once without a lock.

Why: the hook runs in SGLang's scheduler on every decode step (``bench/hook_bench.py`` times
it), and builds several frozen dataclasses a step. Their generated ``__init__`` sets each
field through ``object.__setattr__`` (frozen forbids plain assignment): on the bench's host
a :class:`~.rules.PolicyState` of 24 fields costs 2.9 us that way and
``dataclasses.replace`` of it 5.9 us, where filling the new instance's ``__dict__`` costs
0.3 us. The value made is the one the constructor makes: the same fields, in field order, in
its ``__dict__``, so it compares, hashes, pickles and converts (``asdict``) alike. Only the
``__init__`` call is skipped: so these are for classes without ``__post_init__`` (or, as the
hook's unchecked :class:`~.policy.Observation`, where it would check nothing).

:class:`once` is ``functools.cached_property`` without the lock Python 3.11's takes on every
first read (3.12 dropped it): a frozen value's property is a pure function of its fields,
so two threads that race compute the same value.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Point:
...     x: int
...     y: int = 0
...
...     @once
...     def norm(self) -> int:
...         return abs(self.x) + abs(self.y)
>>> built, moved = build(Point, x=1), replaced(Point(1, 2), y=-3)
>>> (built == Point(1), moved == Point(1, -3), moved.norm, vars(moved))
(True, True, 4, {'x': 1, 'y': -3, 'norm': 4})
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")
V = TypeVar("V")

_TEMPLATES: dict[type, dict[str, Any]] = {}  # a dataclass's fields in order, with defaults


def _template(cls: type) -> dict[str, Any]:
    """``cls``'s fields in order, each with its default (``dataclasses.MISSING`` without)."""
    found = _TEMPLATES.get(cls)
    if found is None:
        if any(f.default_factory is not dataclasses.MISSING for f in dataclasses.fields(cls)):
            raise TypeError(f"{cls.__name__} has a field with a default factory: build it")
        found = _TEMPLATES[cls] = {f.name: f.default for f in dataclasses.fields(cls)}
    return found


def build(cls: type[T], **values: Any) -> T:
    """``cls(**values)`` for a frozen dataclass, without calling its ``__init__`` (the module
    docstring says why); fields left out take their defaults. Every field without a default
    must be given (unchecked: tests compare what this builds with the constructor's)."""
    made: T = object.__new__(cls)
    fields = vars(made)
    fields.update(_template(cls))
    fields.update(values)
    return made


def replaced(value: T, **changes: Any) -> T:
    """``dataclasses.replace(value, **changes)`` for a frozen dataclass, without calling its
    ``__init__``. A value whose ``__dict__`` holds more than its fields (a cached property's
    value) goes through ``dataclasses.replace``: none is copied."""
    cls = type(value)
    template, current = _template(cls), vars(value)
    if len(current) != len(template):
        return dataclasses.replace(value, **changes)  # type: ignore[type-var]
    made: T = object.__new__(cls)
    fields = vars(made)
    fields.update(current)
    fields.update(changes)
    return made


class once(Generic[T, V]):  # a decorator, named as functools.cached_property is
    """A property computed on first read and kept in the instance's ``__dict__`` (which then
    answers every later read): ``functools.cached_property`` without its lock."""

    def __init__(self, func: Callable[[T], V]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type[T], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type[T] | None = None) -> once[T, V]: ...

    @overload
    def __get__(self, instance: T, owner: type[T] | None = None) -> V: ...

    def __get__(self, instance: T | None, owner: type[T] | None = None) -> V | once[T, V]:
        if instance is None:
            return self
        value = self.func(instance)
        vars(instance)[self.name] = value
        return value
