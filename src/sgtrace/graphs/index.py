"""The module index of a source tree and the on-disk cache of module summaries.

The index maps module names to files and answers cheap textual questions (which files mention
a name, which classes name a given base) so that analysis stays demand-driven: only the files
a question needs are parsed with libcst. Summaries are cached by content hash, so a second run
reads pickles instead of parsing; uncached files are parsed in parallel where it pays.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from sgtrace.graphs.outline import outline_module
from sgtrace.graphs.source import SourceTree
from sgtrace.graphs.summary import ModuleSummary

SCHEMA = "sgtrace-summary-4"
_DEF = re.compile(rb"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)", re.MULTILINE)
_CLASS = re.compile(rb"^[ \t]*class[ \t]+(\w+)[ \t]*\(([^)]*)\)", re.MULTILINE)
PARALLEL_MIN_FILES = 16


@dataclass(frozen=True)
class TextIndex:
    class_bases: dict[str, list[tuple[str, str]]]
    defined_names: set[str]


@dataclass(frozen=True)
class ModuleFile:
    module: str
    path: Path
    rel: str
    is_package: bool


class SummaryCache:
    """Pickled summaries under ``DIR/summaries``, keyed by schema, module and content hash."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory / "summaries" if directory is not None else None

    def _path(self, key: str) -> Path | None:
        return self.directory / key[:2] / f"{key}.pkl" if self.directory else None

    def get(self, key: str) -> ModuleSummary | None:
        value = self.get_any(key)
        return value if isinstance(value, ModuleSummary) else None

    def get_any(self, key: str) -> object:
        path = self._path(key)
        if path is None or not path.is_file():
            return None
        try:
            with path.open("rb") as fh:
                value = pickle.load(fh)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError):
            return None  # a damaged entry is re-made
        return value

    def put(self, key: str, summary: ModuleSummary) -> None:
        self.put_any(key, summary)

    def put_any(self, key: str, value: object) -> None:
        path = self._path(key)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with tmp.open("wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(path)


def _summarise(item: tuple[str, str, str, bool, bool]) -> ModuleSummary:
    path, module, rel, is_package, full = item
    source = Path(path).read_bytes().decode("utf-8-sig", errors="replace")  # a BOM is not code
    if not full:
        outline = outline_module(source, module, rel, is_package)
        if outline is not None:
            return outline
    from sgtrace.graphs.collect import collect_module  # libcst: imported only when parsing

    return collect_module(source, module, rel, is_package)


@dataclass
class SourceIndex:
    """Modules of a :class:`SourceTree` and their summaries, loaded on demand."""

    tree: SourceTree
    cache: SummaryCache
    jobs: int = field(default_factory=lambda: min(4, os.cpu_count() or 1))
    _summaries: dict[str, ModuleSummary] = field(default_factory=dict)
    _bytes: dict[str, bytes] = field(default_factory=dict)
    _lines: dict[str, list[str]] = field(default_factory=dict)

    @cached_property
    def modules(self) -> dict[str, ModuleFile]:
        found: dict[str, ModuleFile] = {}
        for package in self.tree.packages:
            top = self.tree.root / package
            paths = [top.with_suffix(".py")] if not top.is_dir() else sorted(top.rglob("*.py"))
            for path in paths:
                rel = path.relative_to(self.tree.root).as_posix()
                parts = rel[:-3].split("/")
                is_package = parts[-1] == "__init__"
                if is_package:
                    parts = parts[:-1]
                if all(p.isidentifier() for p in parts):
                    found[".".join(parts)] = ModuleFile(".".join(parts), path, rel, is_package)
        return found

    @cached_property
    def by_file(self) -> dict[str, ModuleFile]:
        return {m.rel: m for m in self.modules.values()}

    def read(self, module: str) -> bytes:
        if module not in self._bytes:
            self._bytes[module] = self.modules[module].path.read_bytes()
        return self._bytes[module]

    def line_text(self, module: str, line: int) -> str:
        """Line ``line`` (1-based) of ``module``'s source, stripped."""
        if module not in self._lines:
            self._lines[module] = self.read(module).decode("utf-8", errors="replace").splitlines()
        lines = self._lines[module]
        return lines[line - 1].strip() if 0 < line <= len(lines) else ""

    def _key(self, module: str, full: bool) -> str:
        digest = hashlib.sha256(self.read(module)).hexdigest()
        info = self.modules[module]
        depth = "full" if full else "outline"
        return hashlib.sha256(
            f"{SCHEMA}|{depth}|{info.module}|{info.rel}|{digest}".encode()
        ).hexdigest()

    def summary(self, module: str) -> ModuleSummary | None:
        """The definitions of ``module`` (an outline or a full summary), or ``None`` when it
        is not in the tree."""
        if module not in self.modules:
            return None
        if module not in self._summaries:
            self.load([module], full=False)
        return self._summaries[module]

    def full_summary(self, module: str) -> ModuleSummary | None:
        """The full libcst summary of ``module``, call sites included."""
        if module not in self.modules:
            return None
        current = self._summaries.get(module)
        if current is None or current.is_outline:
            self.load([module])
        return self._summaries[module]

    def load(self, modules: Iterable[str], full: bool = True) -> None:
        """Summarise ``modules`` (cache first, then parse in parallel where it pays); with
        ``full=False`` the cheap index pass is enough (definitions only)."""
        self.load_many([(module, full) for module in modules])

    def load_many(self, requests: Iterable[tuple[str, bool]]) -> None:
        """Like :meth:`load`, for ``(module, full)`` pairs parsed together in one batch."""
        todo: list[tuple[str, str, bool]] = []
        for module, full in dict.fromkeys(requests):
            current = self._summaries.get(module)
            if module not in self.modules or (
                current is not None and (not full or not current.is_outline)
            ):
                continue
            if any(m == module and f for m, _, f in todo):
                continue
            key = self._key(module, full)
            cached = self.cache.get(key)
            if cached is not None:
                self._summaries[module] = cached
            else:
                todo.append((module, key, full))
        # the slow full parses first, so that the pool's workers finish together
        todo.sort(key=lambda item: not item[2])
        items = [
            (str(self.modules[m].path), m, self.modules[m].rel, self.modules[m].is_package, f)
            for m, _, f in todo
        ]
        if len(items) >= PARALLEL_MIN_FILES and self.jobs > 1:
            with ProcessPoolExecutor(self.jobs) as pool:
                results = list(pool.map(_summarise, items, chunksize=1 if len(items) < 256 else 8))
        else:
            results = [_summarise(item) for item in items]
        for (module, key, _), summary in zip(todo, results, strict=True):
            self._summaries[module] = summary
            if summary.parse_error is None:
                self.cache.put(key, summary)

    @property
    def loaded(self) -> dict[str, ModuleSummary]:
        return self._summaries

    def mentioning(self, word: str) -> list[str]:
        """Modules whose text contains ``word`` as a whole identifier."""
        pattern = re.compile(rb"\b" + re.escape(word.encode()) + rb"\b")
        return [m for m in self.modules if pattern.search(self.read(m))]

    @cached_property
    def stamp(self) -> str:
        """A digest of every file's path, size and modification time: changes with any file."""
        digest = hashlib.sha256(SCHEMA.encode())
        for info in self.modules.values():
            st = info.path.stat()
            digest.update(f"{info.rel}|{st.st_size}|{st.st_mtime_ns}\n".encode())
        return digest.hexdigest()

    @cached_property
    def text_index(self) -> TextIndex:
        """Class bases and defined names of the whole tree, from a textual scan; kept in the
        cache under a key made of every file's path, size and modification time."""
        key = "text-" + self.stamp
        cached = self.cache.get_any(key)
        if isinstance(cached, TextIndex):
            return cached
        index = TextIndex({}, set())
        for module in self.modules:
            text = self.read(module)
            for match in _CLASS.finditer(text):
                for base in match.group(2).decode(errors="replace").split(","):
                    name = base.strip().rsplit(".", 1)[-1].split("[", 1)[0]
                    if name.isidentifier():
                        index.class_bases.setdefault(name, []).append(
                            (module, match.group(1).decode())
                        )
            index.defined_names.update(m.group(1).decode() for m in _DEF.finditer(text))
        self.cache.put_any(key, index)
        return index

    @property
    def class_bases(self) -> dict[str, list[tuple[str, str]]]:
        """``base name -> [(module, class name)]`` (a superset filter for subclass queries)."""
        return self.text_index.class_bases

    @property
    def defined_names(self) -> set[str]:
        """Every name after ``def`` or ``class`` in the tree (for "did you mean")."""
        return self.text_index.defined_names
