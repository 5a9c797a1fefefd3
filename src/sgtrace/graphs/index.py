"""The module index of a source tree and the on-disk cache of module summaries.

The index maps module names to files and answers cheap textual questions (which files mention
a name, which classes name a given base) so that analysis stays demand-driven: only the files
a question needs are parsed with libcst. Summaries are cached by content hash, so a second run
reads pickles instead of parsing; uncached files are parsed in parallel where it pays.
"""

from __future__ import annotations

import gc
import hashlib
import os
import pickle
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from sgtrace.graphs.source import Listing, SourceTree, list_python_files

if TYPE_CHECKING:  # the parsers and the summaries' types load with the first summary
    from sgtrace.graphs.summary import ModuleSummary

SCHEMA = "sgtrace-summary-5"  # 5: value facts (bindings, lambdas, param calls)
PARALLEL_MIN_FILES = 16

# What one parse job needs: file path, module, relative file, is_package, full, cache file.
ParseJob = tuple[str, str, str, bool, bool, "Path | None"]


@dataclass(frozen=True)
class ModuleFile:
    module: str
    path: Path
    rel: str
    is_package: bool


@contextmanager
def paused_gc() -> Iterator[None]:
    """Python's cyclic garbage collector off for the ``with`` block (or decorated function).

    Loading summaries, resolving and rendering allocate millions of small objects that form no
    cycles worth collecting, and each full pass of the collector walks every object already
    loaded: on a whole package, loading cached summaries takes three times as long with it.
    Reference counting still frees what is dropped; nested blocks leave it to the outermost.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class SummaryCache:
    """Pickled summaries under ``DIR/summaries``, keyed by schema, module and content hash."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory / "summaries" if directory is not None else None

    def path(self, key: str) -> Path | None:
        """Where the entry ``key`` is kept, or ``None`` when nothing is cached."""
        return self.directory / key[:2] / f"{key}.pkl" if self.directory else None

    def get(self, key: str) -> ModuleSummary | None:
        from sgtrace.graphs.summary import ModuleSummary

        value = self.get_any(key)
        return value if isinstance(value, ModuleSummary) else None

    def get_any(self, key: str) -> object:
        path = self.path(key)
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
        path = self.path(key)
        if path is not None:
            store(path, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


@cache
def engine_stamp() -> str:
    """A digest of the path, size and mtime of every module of the installed sgtrace: results
    cached under it are not read back by another sgtrace, which may compute them differently."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        st = path.stat()
        digest.update(f"{path.relative_to(package)}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def store(path: Path, blob: bytes) -> None:
    """Write ``blob`` to ``path`` atomically (a reader sees the old entry or the new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(blob)
    tmp.replace(path)


def _summarise(job: ParseJob, validate: bool = True) -> ModuleSummary:
    path, module, rel, is_package, full, _ = job
    from sgtrace.graphs.outline import outline_module

    source = Path(path).read_bytes().decode("utf-8-sig", errors="replace")  # a BOM is not code
    if not full:
        outline = outline_module(source, module, rel, is_package)
        if outline is not None:
            return outline
    from sgtrace.graphs.collect import collect_module  # libcst: imported only when parsing

    return collect_module(source, module, rel, is_package, validate)


def _summarise_and_store(job: ParseJob) -> bytes:
    """In a pool worker: summarise, pickle once, keep the pickle in the cache and hand it back
    (the parent only unpickles: no second pickling, and the cache is written in parallel).
    A worker only parses, so libcst's per-node validation is off for its parses."""
    summary = _summarise(job, validate=False)
    blob = pickle.dumps(summary, protocol=pickle.HIGHEST_PROTOCOL)
    if job[5] is not None and summary.parse_error is None:
        store(job[5], blob)
    return blob


def _summarise_here(jobs: list[ParseJob]) -> Iterator[ModuleSummary]:
    """The summaries of ``jobs``, one by one in this process, written to their cache files."""
    for job in jobs:
        summary = _summarise(job)
        if job[5] is not None and summary.parse_error is None:
            store(job[5], pickle.dumps(summary, protocol=pickle.HIGHEST_PROTOCOL))
        yield summary


def tree_class_bases(files: list[tuple[str, str]]) -> dict[str, list[tuple[str, str]]]:
    """``base name -> [(module, class name)]`` over ``(module, path)`` files, from a textual
    scan (a top-level function, so that a pool worker can run it)."""
    from sgtrace.graphs.outline import scan_class_bases

    found: dict[str, list[tuple[str, str]]] = {}
    for module, path in files:
        for name, bases in scan_class_bases(Path(path).read_bytes()):
            for base in bases:
                found.setdefault(base, []).append((module, name))
    return found


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
    def listing(self) -> Listing:
        """The tree's module files, and the files left out of it (FIFOs, broken links...)."""
        return list_python_files(self.tree)

    @cached_property
    def modules(self) -> dict[str, ModuleFile]:
        found: dict[str, ModuleFile] = {}
        root = self.tree.root
        for rel in self.listing.files:
            path = root / rel
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

    @paused_gc()
    def load_many(self, requests: Iterable[tuple[str, bool]]) -> None:
        """Like :meth:`load`, for ``(module, full)`` pairs parsed together in one batch."""
        wanted: dict[str, bool] = {}
        for module, full in requests:
            wanted[module] = wanted.get(module, False) or full
        jobs: list[ParseJob] = []
        for module, full in wanted.items():
            current = self._summaries.get(module)
            if module not in self.modules or (
                current is not None and (not full or not current.is_outline)
            ):
                continue
            key = self._key(module, full)
            cached = self.cache.get(key)
            if cached is not None:
                self._summaries[module] = cached
                continue
            info = self.modules[module]
            jobs.append(
                (str(info.path), module, info.rel, info.is_package, full, self.cache.path(key))
            )
        # the slow full parses first, largest first, so that the pool's workers finish together
        jobs.sort(key=lambda job: (not job[4], -len(self.read(job[1]))))
        if len(jobs) < PARALLEL_MIN_FILES or self.jobs < 2:
            self._keep(jobs, _summarise_here(jobs))
        else:
            self._summarise_in_pool(jobs)

    def _keep(self, jobs: list[ParseJob], summaries: Iterable[ModuleSummary]) -> None:
        for job, summary in zip(jobs, summaries, strict=True):
            self._summaries[job[1]] = summary

    def _summarise_in_pool(self, jobs: list[ParseJob]) -> None:
        """Parse ``jobs`` in a pool of :attr:`jobs` processes; the workers write the cache. The
        worker that frees up first then scans the tree for :attr:`class_bases`, which most
        analyses ask for next and this process would otherwise scan alone afterwards."""
        from concurrent.futures import ProcessPoolExecutor  # costs start-up time; rarely needed

        with ProcessPoolExecutor(self.jobs) as pool:
            chunk = 1 if len(jobs) < 256 else 4
            blobs = pool.map(_summarise_and_store, jobs, chunksize=chunk)
            bases = None
            if "class_bases" not in vars(self) and self._cached_class_bases() is None:
                bases = pool.submit(tree_class_bases, self._files())
            self._keep(jobs, (pickle.loads(blob) for blob in blobs))
            if bases is not None:
                self._keep_class_bases(bases.result())

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
    def class_bases(self) -> dict[str, list[tuple[str, str]]]:
        """``base name -> [(module, class name)]`` from a textual scan of the whole tree (a
        superset filter for subclass queries); cached under the tree's :attr:`stamp`."""
        cached = self._cached_class_bases()
        if cached is not None:
            return cached
        return self._keep_class_bases(tree_class_bases(self._files()))

    def _files(self) -> list[tuple[str, str]]:
        return [(module, str(info.path)) for module, info in self.modules.items()]

    @property
    def _bases_key(self) -> str:
        return f"bases-{self.stamp}-{engine_stamp()}"

    def _cached_class_bases(self) -> dict[str, list[tuple[str, str]]] | None:
        cached = self.cache.get_any(self._bases_key)
        return cached if isinstance(cached, dict) else None

    def _keep_class_bases(
        self, found: dict[str, list[tuple[str, str]]]
    ) -> dict[str, list[tuple[str, str]]]:
        self.cache.put_any(self._bases_key, found)
        self.class_bases = found  # what the cached property would hold
        return found

    @cached_property
    def defined_names(self) -> set[str]:
        """Every name after ``def`` or ``class`` in the tree (for "did you mean")."""
        key = f"names-{self.stamp}-{engine_stamp()}"
        cached = self.cache.get_any(key)
        if isinstance(cached, set):
            return cached
        from sgtrace.graphs.outline import scan_defined_names

        found: set[str] = set()
        for module in self.modules:
            found |= scan_defined_names(self.read(module))
        self.cache.put_any(key, found)
        return found
