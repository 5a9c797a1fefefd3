"""The tracer's fact extractors, compiled from the JSON of ``sgtrace.tracer.selection``.

A fact is read from the first candidate path that yields a value: a local variable or argument
(or ``return``), then attributes (runs of names joined into one C-level ``attrgetter``) and
indexes; a missing attribute or index yields nothing, never an error.
"""

from __future__ import annotations

import json
import json.encoder
import numbers
from collections.abc import Callable, Iterable, Mapping
from operator import attrgetter
from typing import Any

MISSING: Any = object()  # nothing found
RETURN: Any = object()  # the source of a fact read from the return value
Step = int | Callable[[Any], Any]
Transform = Callable[[Any], Any]
# (fact name, candidates (source, steps), transform)
FactReader = tuple[str, tuple[tuple[Any, tuple[Step, ...]], ...], Transform]
encode: Callable[[Any], str] = json.JSONEncoder(separators=(",", ":")).encode


def _fact_encoder() -> Callable[[Any], str]:
    """Encode a facts dict as compact JSON: one C encoder made once (``JSONEncoder.encode``
    makes a new one per call, which costs more than the encoding itself)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return encode
    encoder = make(
        None, None, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
    )
    return lambda value: "".join(encoder(value, 0))


encode_facts = _fact_encoder()


def steps_of(path: Iterable[str | int]) -> tuple[Step, ...]:
    """A path (attribute names; ints index, as ``shape.0``) as steps: runs of attribute names
    joined into one ``operator.attrgetter``, ints kept."""
    steps: list[str | int] = []
    for part in path:
        if isinstance(part, int) or not steps or isinstance(steps[-1], int):
            steps.append(part)
        else:
            steps[-1] = f"{steps[-1]}.{part}"
    return tuple(step if isinstance(step, int) else attrgetter(step) for step in steps)


def parse_path(parts: Iterable[str]) -> tuple[Step, ...]:
    """Steps of a JSON path: digit strings index."""
    return steps_of(int(part) if part.isdigit() else part for part in parts)


def walk(obj: Any, steps: tuple[Step, ...]) -> Any:
    """``obj`` read along ``steps``; :data:`MISSING` where an attribute or index is absent or a
    value on the way is None. Other errors (a property that raises) reach the caller."""
    for step in steps:
        if step.__class__ is int:
            try:
                obj = obj[step]
            except (IndexError, KeyError, TypeError):
                return MISSING
        else:
            try:
                obj = step(obj)  # type: ignore[operator]
            except AttributeError:
                return MISSING
        if obj is None:
            return MISSING
    return obj


def _numbers(value: Any) -> bool:
    kinds = set(map(type, value))
    if kinds <= {int, float}:  # the common case, at C speed
        return True
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)


def _to_cpu_list(value: Any) -> Any:
    if getattr(value, "is_cpu", True) is False:  # a device tensor: reading it would sync
        return MISSING
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)) and len(value) <= 4096 and _numbers(value):
        return list(value)
    return MISSING


def _str(value: Any) -> Any:
    return value if isinstance(value, str) else MISSING


def _int(value: Any) -> Any:
    if value.__class__ is int:
        return value
    return int(value) if isinstance(value, numbers.Integral) else MISSING


def _float(value: Any) -> Any:
    if value.__class__ is float:
        return value
    return float(value) if isinstance(value, numbers.Real) else MISSING


TRANSFORMS: Mapping[str, Transform] = {
    "int": _int,
    "float": _float,
    "bool": lambda v: v if isinstance(v, bool) else MISSING,
    "str": _str,
    "name": lambda v: _str(v if isinstance(v, str) else getattr(v, "name", None)),
    "len": lambda v: len(v) if hasattr(v, "__len__") else MISSING,
    "cpu_list": _to_cpu_list,
}


def compile_fact(spec: Mapping[str, Any]) -> tuple[str, FactReader]:
    """``(moment, reader)`` of one fact spec of the JSON config."""
    sources = tuple(
        (RETURN if path[0] == "return" else path[0], parse_path(path[1:])) for path in spec["from"]
    )
    return str(spec["at"]), (str(spec["fact"]), sources, TRANSFORMS[spec["as"]])


class Probe:
    """A selected function: its name, role, compiled extractors, and code once attached."""

    __slots__ = ("name", "role", "entry", "exit", "code", "prefix", "has_facts")

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.name: str = config["name"]
        self.role: str = config["role"]
        self.code: Any = None
        self.prefix = encode({"type": "call", "fn": self.name, "role": self.role})[:-1] + ","
        specs = [compile_fact(spec) for spec in config["facts"]]
        self.entry = tuple(reader for at, reader in specs if at == "entry")
        self.exit = tuple(reader for at, reader in specs if at == "exit")
        self.has_facts = bool(specs)
