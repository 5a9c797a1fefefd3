"""The on-disk cache of summaries and results: checked entries, never pickles.

Entries are written by :mod:`sgtrace.graphs.codec` (JSON shaped by declared types, a header with
the key, a schema digest and a checksum) and atomically. An entry that cannot be read back
exactly (missing, damaged, edited, written for another key, another sgtrace's dataclass
fields or an older format) reads as absent: the caller rebuilds it and the new entry replaces
it. Nothing read from the cache directory can run code.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sgtrace.graphs.codec import Codec, CodecError, seal, unseal

if TYPE_CHECKING:
    from sgtrace.graphs.summary import ModuleSummary

SUFFIX = ".sgc"


def store(path: Path, blob: bytes) -> None:
    """Write ``blob`` to ``path`` atomically (a reader sees the old entry or the new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(blob)
    tmp.replace(path)


def summary_type() -> type[ModuleSummary]:
    from sgtrace.graphs.summary import ModuleSummary  # loaded with the first summary

    return ModuleSummary


class SummaryCache:
    """Entries under ``DIR/summaries``, keyed by schema, module and content hash (summaries)
    or by a request digest (graphs, outputs, scans); ``directory=None`` caches nothing."""

    def __init__(self, directory: Path | None) -> None:
        self.root = directory
        self.directory = directory / "summaries" if directory is not None else None
        self.codec = Codec()

    def path(self, key: str) -> Path | None:
        """Where the entry ``key`` is kept, or ``None`` when nothing is cached."""
        return self.directory / key[:2] / f"{key}{SUFFIX}" if self.directory else None

    def get(self, key: str) -> ModuleSummary | None:
        """The summary kept under ``key``, or ``None`` (absent or not valid: rebuild it)."""
        value: ModuleSummary | None = self.get_any(key, summary_type())
        return value

    def put(self, key: str, summary: ModuleSummary) -> None:
        self.put_any(key, summary, summary_type())

    def get_any(self, key: str, hint: Any) -> Any:
        """The value of declared type ``hint`` kept under ``key``, or ``None``."""
        path = self.path(key)
        if path is None:
            return None
        try:
            blob = path.read_bytes()
        except OSError:
            return None  # absent, or unreadable: rebuilt and rewritten
        try:
            return self.codec.decode(unseal(blob, key, self.codec.schema(hint)), hint)
        except CodecError:
            return None  # damaged, edited or stale: rebuilt and rewritten

    def put_any(self, key: str, value: object, hint: Any) -> None:
        path = self.path(key)
        if path is not None:
            store(path, self.entry(key, value, hint))

    def entry(self, key: str, value: object, hint: Any) -> bytes:
        """The bytes :meth:`put_any` writes (for a worker process that stores entries itself)."""
        return seal(key, self.codec.schema(hint), self.codec.encode(value, hint))
