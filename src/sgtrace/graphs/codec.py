"""A data-only encoding of sgtrace's values (summaries, call graphs) for the on-disk cache.

The cache lives in a directory other users or programs may write, so an entry must never be
able to run code (as a pickle can) nor change an answer unnoticed. Values are written as JSON
shaped by their *declared* types and read back only into those types: a dataclass is the list
of its fields' values in declaration order (read generically from ``dataclasses.fields`` and
the type hints, so that a field added to a summary class needs no change here), an ``Enum`` its
value, a ``dict`` with ``str`` keys an object, any other dict a list of pairs, a union of
several types ``[member name, value]``. Anything else in the data, a field too few or too many,
a wrong scalar type, is a :class:`CodecError`.

A stored entry is one header line and the JSON payload (see :func:`seal`, :func:`unseal`):

    sgtrace-cache 1 <key> <schema digest> <sha-256 of the payload>\\n{payload}

so that a damaged or edited payload (a flipped digit), an entry copied under another key, and
one written for other dataclass fields (:meth:`Codec.schema`) are each refused and rebuilt.

>>> codec = Codec()
>>> blob = seal("k", codec.schema(tuple[int, ...]), codec.encode((1, 2), tuple[int, ...]))
>>> codec.decode(unseal(blob, "k", codec.schema(tuple[int, ...])), tuple[int, ...])
(1, 2)
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import types
import typing
from collections.abc import Callable

MAGIC = b"sgtrace-cache 1"

Encode = Callable[[object], object]
Decode = Callable[[object], object]


class CodecError(ValueError):
    """A value or an entry that does not fit the declared type or the entry format."""


@dataclasses.dataclass(frozen=True)
class _Plan:
    """How to write and read one declared type."""

    encode: Encode
    decode: Decode
    describe: str  # the type's shape, for the schema digest


def seal(key: str, schema: str, payload: bytes) -> bytes:
    """An entry: the header line (key, schema, checksum) followed by ``payload``."""
    digest = hashlib.sha256(payload).hexdigest()
    return b"%s %s %s %s\n%s" % (MAGIC, key.encode(), schema.encode(), digest.encode(), payload)


def unseal(blob: bytes, key: str, schema: str) -> bytes:
    """The payload of an entry written by :func:`seal` for ``key`` and ``schema``, checked."""
    header, newline, payload = blob.partition(b"\n")
    parts = header.split(b" ")
    if not newline or len(parts) != 5 or b" ".join(parts[:2]) != MAGIC:
        raise CodecError("not an sgtrace cache entry")
    if parts[2] != key.encode():
        raise CodecError("the entry was written under another key")
    if parts[3] != schema.encode():
        raise CodecError("the entry was written for another schema")
    if hashlib.sha256(payload).hexdigest().encode() != parts[4]:
        raise CodecError("the entry's checksum does not match its bytes")
    return payload


class Codec:
    """Encoders and decoders compiled per declared type, and kept for the next value."""

    def __init__(self) -> None:
        self._plans: dict[object, _Plan] = {}

    def encode(self, value: object, hint: object) -> bytes:
        """``value`` as JSON bytes, shaped by ``hint`` (a type such as ``dict[str, int]``)."""
        try:
            data = self._plan(hint).encode(value)
        except (TypeError, KeyError, AttributeError) as exc:
            raise CodecError(f"cannot encode {type(value).__name__}: {exc}") from exc
        return json.dumps(data, separators=(",", ":")).encode()

    def decode(self, payload: bytes, hint: object) -> typing.Any:
        """The value ``payload`` (from :meth:`encode`) holds, checked against ``hint``."""
        try:
            return self._plan(hint).decode(json.loads(payload))
        except CodecError:
            raise
        except (ValueError, TypeError, KeyError, IndexError, RecursionError) as exc:
            raise CodecError(f"malformed {hint}: {exc!r}") from exc

    def schema(self, hint: object) -> str:
        """A digest of the shape of ``hint``: every dataclass's field names and types, nested."""
        return hashlib.sha256(self._plan(hint).describe.encode()).hexdigest()[:16]

    def _plan(self, hint: object) -> _Plan:
        plan = self._plans.get(hint)
        if plan is None:
            plan = self._make(hint)
            self._plans[hint] = plan
        return plan

    def _make(self, hint: object) -> _Plan:
        if hint is typing.Any or hint is object:
            raise CodecError("values of undeclared type cannot be cached")
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            return self._dataclass(hint)
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return _enum(hint)
        if hint in _SCALARS:
            return _scalar(typing.cast(type, hint))
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is typing.Union or origin is types.UnionType:
            return self._union(args)
        if origin is tuple:
            return self._tuple(args)
        if origin in (list, set, frozenset):
            return self._collection(typing.cast(type, origin), args[0])
        if origin is dict:
            return self._dict(args[0], args[1])
        raise CodecError(f"no encoding for the type {hint!r}")

    def _dataclass(self, cls: type) -> _Plan:
        """Fields by position, read lazily so that a dataclass may hold itself."""
        names = [f.name for f in dataclasses.fields(cls) if f.init]
        try:
            hints = typing.get_type_hints(cls)
        except NameError as exc:
            raise CodecError(f"the fields of {cls.__qualname__} name unknown types") from exc
        fields: list[_Plan] = []
        # a field of this very type (a tree) finds this plan, finished by the time it runs
        self._plans[cls] = _Plan(
            lambda value: self._plans[cls].encode(value),
            lambda data: self._plans[cls].decode(data),
            cls.__qualname__,
        )
        fields.extend(self._plan(hints[name]) for name in names)

        def encode(value: object) -> object:
            if type(value) is not cls:
                raise TypeError(f"expected {cls.__qualname__}, got {type(value).__name__}")
            return [plan.encode(getattr(value, name)) for name, plan in pairs]

        def decode(data: object) -> object:
            if type(data) is not list or len(data) != len(fields):
                raise CodecError(f"{cls.__qualname__}: expected {len(fields)} fields")
            return cls(*[plan.decode(item) for plan, item in zip(fields, data, strict=True)])

        pairs = list(zip(names, fields, strict=True))
        shape = ",".join(f"{n}:{p.describe}" for n, p in pairs)
        return _Plan(encode, decode, f"{cls.__module__}.{cls.__qualname__}({shape})")

    def _union(self, members: tuple[object, ...]) -> _Plan:
        others = [m for m in members if m is not type(None)]
        optional = len(others) < len(members)
        if len(others) == 1:
            inner = self._plan(others[0])
            shape = f"{inner.describe}|None" if optional else inner.describe
            return _Plan(_optional(inner.encode), _optional(inner.decode), shape)
        plans = {_member_name(m): (m, self._plan(m)) for m in others}

        def encode(value: object) -> object:
            if value is None and optional:
                return None
            for name, (member, plan) in plans.items():
                if _is_instance(value, member):
                    return [name, plan.encode(value)]
            raise TypeError(f"{type(value).__name__} is none of {', '.join(plans)}")

        def decode(data: object) -> object:
            if data is None and optional:
                return None
            if type(data) is not list or len(data) != 2 or data[0] not in plans:
                raise CodecError(f"expected one of {', '.join(plans)}")
            return plans[data[0]][1].decode(data[1])

        shape = "|".join(f"{n}:{p.describe}" for n, (_, p) in plans.items())
        return _Plan(encode, decode, f"({shape}{'|None' if optional else ''})")

    def _tuple(self, args: tuple[object, ...]) -> _Plan:
        if len(args) == 2 and args[1] is Ellipsis:
            item = self._plan(args[0])
            return _Plan(
                lambda value: [item.encode(v) for v in _checked(value, tuple)],
                lambda data: tuple([item.decode(v) for v in _checked(data, list)]),
                f"tuple[{item.describe},...]",
            )
        plans = [self._plan(a) for a in args]

        def decode(data: object) -> object:
            if type(data) is not list or len(data) != len(plans):
                raise CodecError(f"expected a tuple of {len(plans)}")
            return tuple([p.decode(v) for p, v in zip(plans, data, strict=True)])

        return _Plan(
            lambda value: [p.encode(v) for p, v in zip(plans, _checked(value, tuple), strict=True)],
            decode,
            f"tuple[{','.join(p.describe for p in plans)}]",
        )

    def _collection(self, kind: type, item_hint: object) -> _Plan:
        item = self._plan(item_hint)
        return _Plan(
            lambda value: [item.encode(v) for v in _checked(value, kind)],
            lambda data: kind([item.decode(v) for v in _checked(data, list)]),
            f"{kind.__name__}[{item.describe}]",
        )

    def _dict(self, key_hint: object, value_hint: object) -> _Plan:
        key, value = self._plan(key_hint), self._plan(value_hint)
        shape = f"dict[{key.describe},{value.describe}]"
        if key_hint is str:
            return _Plan(
                lambda v: {_checked(k, str): value.encode(x) for k, x in _checked(v, dict).items()},
                lambda d: {_checked(k, str): value.decode(x) for k, x in _checked(d, dict).items()},
                shape,
            )
        return _Plan(
            lambda v: [[key.encode(k), value.encode(x)] for k, x in _checked(v, dict).items()],
            lambda d: {key.decode(k): value.decode(x) for k, x in map(_pair, _checked(d, list))},
            shape,
        )


_SCALARS = (str, int, float, bool, type(None))


def _scalar(kind: type) -> _Plan:
    def check(value: object) -> object:
        if type(value) is not kind and not (kind is float and type(value) is int):
            raise CodecError(f"expected {kind.__name__}, got {type(value).__name__}")
        return value

    return _Plan(check, check, kind.__name__)


def _enum(kind: type[enum.Enum]) -> _Plan:
    def decode(data: object) -> object:
        try:
            return kind(data)
        except ValueError as exc:
            raise CodecError(f"{data!r} is not a {kind.__name__}") from exc

    members = ",".join(str(m.value) for m in kind)
    return _Plan(lambda value: _checked(value, kind).value, decode, f"{kind.__name__}{{{members}}}")


def _optional(inner: Callable[[object], object]) -> Callable[[object], object]:
    return lambda value: None if value is None else inner(value)


def _checked(value: typing.Any, kind: type) -> typing.Any:
    if not isinstance(value, kind):
        raise CodecError(f"expected {kind.__name__}, got {type(value).__name__}")
    return value


def _pair(data: object) -> tuple[object, object]:
    if type(data) is not list or len(data) != 2:
        raise CodecError("expected a [key, value] pair")
    return data[0], data[1]


def _member_name(member: object) -> str:
    return getattr(member, "__qualname__", None) or repr(member)


def _is_instance(value: object, member: object) -> bool:
    origin = typing.get_origin(member) or member
    return isinstance(origin, type) and isinstance(value, origin)
