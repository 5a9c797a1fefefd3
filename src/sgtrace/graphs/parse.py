"""Summarise files, here or in a pool of worker processes that die with the process that made it.

A :class:`ParseJob` is one file to summarise (an outline with ``ast`` or a full libcst summary,
see ``outline.py`` and ``collect.py``). Many jobs go to :func:`parse_pool`, in batches (one
codec per batch); the workers write the cache entries themselves, in parallel, and hand the
summaries back. A worker watches the process that started it and exits as soon as that one
is gone (killed, crashed): a killed run leaves no parse workers behind.
"""

from __future__ import annotations

import ast
import os
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sgtrace.graphs.cache import SummaryCache, store, summary_type
from sgtrace.graphs.callsites import PARITY_SCHEMA, full_summary

if TYPE_CHECKING:
    from sgtrace.graphs.summary import ModuleSummary

ORPHAN_CHECK_S = 0.25  # how often a worker looks for its parent


@dataclass(frozen=True)
class ParseJob:
    """One file to summarise: where it is, which module it is, how deep, and its cache key."""

    path: str
    module: str
    rel: str
    is_package: bool
    full: bool
    key: str


def summarise(job: ParseJob, validate: bool = True) -> ModuleSummary:
    """The summary of one file; a file nested deeper than sgtrace's own traversals can follow
    (they recurse per level, up to Python's recursion limit) gives a summary whose
    ``parse_error`` names the file, so that the rest of the tree is still analysed."""
    try:
        return _parse(job, validate)
    except RecursionError:
        reason = "nested too deeply for sgtrace's traversal (RecursionError)"
        return summary_type()(
            job.module, job.rel, job.is_package, parse_error=f"{job.rel}: {reason}"
        )


def _parse(job: ParseJob, validate: bool) -> ModuleSummary:
    """An outline or a full summary from ``ast`` (see ``callsites.py``); libcst for a full
    summary when the ``ast`` path does not match the summary classes, and for what ``ast``
    cannot parse (libcst then reports the error)."""
    from sgtrace.graphs.outline import outline_module

    source = Path(job.path).read_bytes().decode("utf-8-sig", errors="replace")  # BOM: not code
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        tree = None
    if tree is not None and job.full and has_fast_calls():
        return full_summary(source, tree, job.module, job.rel, job.is_package)
    if tree is not None and not job.full:
        outline = outline_module(source, job.module, job.rel, job.is_package, tree)
        if outline is not None:
            return outline
    from sgtrace.graphs.collect import collect_module  # libcst: imported only when parsing

    return collect_module(source, job.module, job.rel, job.is_package, validate)


@cache
def has_fast_calls() -> bool:
    """Whether the summary classes have the shape ``callsites.py`` was checked against."""
    from sgtrace.graphs.codec import Codec

    return Codec().schema(summary_type()) == PARITY_SCHEMA


def summarise_and_store(
    jobs: Sequence[ParseJob], cache: SummaryCache, validate: bool = True
) -> Iterator[ModuleSummary]:
    """The summaries of ``jobs``, one by one, each written to the cache as it is made (a file
    that did not parse is not cached: it is reported again on the next run)."""
    for job in jobs:
        summary = summarise(job, validate)
        path = cache.path(job.key)
        if path is not None and summary.parse_error is None:
            store(path, cache.entry(job.key, summary, summary_type()))
        yield summary


def summarise_batch(directory: Path | None, jobs: Sequence[ParseJob]) -> list[ModuleSummary]:
    """In a pool worker: summarise and cache a batch. A worker only parses, so libcst's
    per-node validation is off for its parses (see ``collect.trusting_the_parser``)."""
    return list(summarise_and_store(jobs, SummaryCache(directory), validate=False))


def parse_pool(workers: int) -> ProcessPoolExecutor:
    """A process pool whose workers exit when this process is gone."""
    return ProcessPoolExecutor(workers, initializer=watch_parent, initargs=(os.getpid(),))


def watch_parent(creator: int) -> None:
    """In a worker: start a daemon thread that ends this process once its parent is gone.

    A worker blocked on the pool's queue never sees its parent die (every worker holds the
    queue's write end too), and one busy parsing would finish its batch first: so the thread
    polls the parent pid, which changes when the parent dies and the worker is re-parented.
    The parent is ``creator`` (the process that made the pool), or the fork server that
    started the worker for it (which exits with it); a worker that starts after ``creator``
    is gone exits at once.
    """
    parent = os.getppid()
    if parent != creator and not _is_alive(creator):
        os._exit(1)
    threading.Thread(target=_exit_when_orphaned, args=(parent,), daemon=True).start()


def _is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


def _exit_when_orphaned(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(ORPHAN_CHECK_S)
    os._exit(1)
