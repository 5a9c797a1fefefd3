"""The module index of a source tree and the on-disk cache of module summaries.

The index maps module names to files and answers cheap textual questions (which files mention
a name, which classes name a given base) so that analysis stays demand-driven: only the files
a question needs are parsed. Summaries are cached by content hash, so a second run
reads checked entries instead of parsing; uncached files are parsed in parallel where it pays.
"""

from __future__ import annotations

import gc
import hashlib
import os
import re
from array import array
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache, cached_property
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING

from sgtrace.graphs.cache import SummaryCache
from sgtrace.graphs.parse import ParseJob, parse_pool, summarise_and_store, summarise_batch
from sgtrace.graphs.progress import Progress, ProgressSink, Stage
from sgtrace.graphs.source import Listing, SourceTree, list_python_files

if TYPE_CHECKING:  # the parsers and the summaries' types load with the first summary
    from sgtrace.graphs.summary import ModuleSummary

SCHEMA = "sgtrace-summary-7"  # 7: calls as arguments, `async for`/`async with` facts
PARALLEL_MIN_FILES = 16
BATCH_FILES = 8  # files per task of the parse pool: one codec each, few round trips
ClassBases = dict[str, list[tuple[str, str]]]  # base name -> [(module, class name)]


# What str.splitlines() also ends a line at, beyond \n, \r and \r\n, as UTF-8 bytes.
_OTHER_BREAKS = re.compile(rb"[\x0b\x0c\x1c-\x1e]|\xc2\x85|\xe2\x80[\xa8\xa9]")


@dataclass(frozen=True)
class SourceLines:
    r"""A module's lines, as ``data.decode("utf-8", errors="replace").splitlines()`` numbers them,
    each decoded when asked for: the offsets of their ends over the source bytes the index
    holds anyway. A list of every line as ``str`` would hold the tree's source twice more
    (0.5.23: 1.8 million lines, some 150 MiB).

    >>> SourceLines.of(b"a = 1\r\nb = 2\n").text(2)
    'b = 2'
    """

    data: bytes
    ends: array[int]  # offset after each line's break
    decoded: tuple[str, ...] = ()  # every line, where bytes and text break lines differently

    @classmethod
    def of(cls, data: bytes) -> SourceLines:
        if _OTHER_BREAKS.search(data):
            return cls(data, array("L"), tuple(data.decode("utf-8", "replace").splitlines()))
        return cls(data, array("L", accumulate(map(len, data.splitlines(keepends=True)))))

    def text(self, line: int) -> str:
        """Line ``line`` (1-based), its break left out; empty past the end."""
        if self.decoded:
            return self.decoded[line - 1] if 0 < line <= len(self.decoded) else ""
        if not 0 < line <= len(self.ends):
            return ""
        start = self.ends[line - 2] if line > 1 else 0
        raw = self.data[start : self.ends[line - 1]].rstrip(b"\r\n")
        return raw.decode("utf-8", errors="replace")


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
    progress: ProgressSink | None = None  # told how parsing advances (see progress.py)
    _summaries: dict[str, ModuleSummary] = field(default_factory=dict)
    _bytes: dict[str, bytes] = field(default_factory=dict)
    _lines: dict[str, SourceLines] = field(default_factory=dict)
    loads: int = 0  # summaries kept so far: changes whenever :attr:`loaded` does

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
        lines = self._lines.get(module)
        if lines is None:
            lines = self._lines[module] = SourceLines.of(self.read(module))
        return lines.text(line).strip()

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
                self.loads += 1
                continue
            info = self.modules[module]
            jobs.append(ParseJob(str(info.path), module, info.rel, info.is_package, full, key))
        # the slow full parses first, largest first, so that the pool's workers finish together
        jobs.sort(key=lambda job: (not job.full, -len(self.read(job.module))))
        if len(jobs) < PARALLEL_MIN_FILES or self.jobs < 2:
            self._keep(jobs, summarise_and_store(jobs, self.cache))
        else:
            self._summarise_in_pool(jobs)

    def _keep(self, jobs: list[ParseJob], summaries: Iterable[ModuleSummary]) -> None:
        for job, summary in zip(jobs, summaries, strict=True):
            self._summaries[job.module] = summary
            self.loads += 1

    def _summarise_in_pool(self, jobs: list[ParseJob]) -> None:
        """Parse ``jobs`` in a pool of :attr:`jobs` processes; the workers write the cache. The
        worker that frees up first then scans the tree for :attr:`class_bases`, which most
        analyses ask for next and this process would otherwise scan alone afterwards."""
        size = 1 if len(jobs) < 256 else BATCH_FILES
        batches = [jobs[i : i + size] for i in range(0, len(jobs), size)]
        with parse_pool(self.jobs) as pool:
            done = pool.map(summarise_batch, [self.cache.root] * len(batches), batches)
            bases = None
            if "class_bases" not in vars(self) and self._cached_class_bases() is None:
                bases = pool.submit(tree_class_bases, self._files())
            self._keep(jobs, self._counted((s for batch in done for s in batch), len(jobs)))
            if bases is not None:
                self._keep_class_bases(bases.result())

    def _counted(self, summaries: Iterable[ModuleSummary], total: int) -> Iterator[ModuleSummary]:
        """``summaries`` (``total`` of them) as they come, their count told to :attr:`progress`."""
        for done, summary in enumerate(summaries, 1):
            if self.progress is not None and (done % BATCH_FILES == 0 or done == total):
                self.progress(Progress(Stage.PARSE, done, total))
            yield summary

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
        cached = self.cache.get_any(self._bases_key, ClassBases)
        return cached if isinstance(cached, dict) else None

    def _keep_class_bases(
        self, found: dict[str, list[tuple[str, str]]]
    ) -> dict[str, list[tuple[str, str]]]:
        self.cache.put_any(self._bases_key, found, ClassBases)
        self.class_bases = found  # what the cached property would hold
        return found

    @cached_property
    def defined_names(self) -> set[str]:
        """Every name after ``def`` or ``class`` in the tree (for "did you mean")."""
        key = f"names-{self.stamp}-{engine_stamp()}"
        cached = self.cache.get_any(key, set[str])
        if isinstance(cached, set):
            return cached
        from sgtrace.graphs.outline import scan_defined_names

        found: set[str] = set()
        for module in self.modules:
            found |= scan_defined_names(self.read(module))
        self.cache.put_any(key, found, set[str])
        return found
