"""What every command shares: error reporting, the --source options, opening a project."""

from __future__ import annotations

import atexit
import functools
import gc
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from sgtrace.errors import ProblemFound, SgtraceError
from sgtrace.graphs.build import Project
from sgtrace.graphs.progress import ThrottledProgress
from sgtrace.graphs.source import open_source

F = TypeVar("F", bound=Callable[..., Any])


class SgtraceClickError(click.ClickException):
    """An sgtrace error as click shows it. Its exit code is its class's: click reads
    ``exit_code`` from the exception and declares it a class variable (8.5), so each code has
    its own subclass (:func:`click_error`)."""


@functools.cache
def click_error(exit_code: int) -> type[SgtraceClickError]:
    """The :class:`SgtraceClickError` subclass that exits with ``exit_code``."""

    class CodedError(SgtraceClickError):
        pass

    CodedError.exit_code = exit_code
    CodedError.__name__ = CodedError.__qualname__ = f"SgtraceClickError{exit_code}"
    return CodedError


def reports_errors(func: F) -> F:
    """Turn sgtrace's errors into click errors with the right exit code (``--debug`` re-raises)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (SgtraceError, ProblemFound) as exc:
            if click.get_current_context().find_root().params.get("debug"):
                raise
            raise click_error(exc.exit_code)(str(exc)) from exc

    return wrapper  # type: ignore[return-value]


def source_options(func: F) -> F:
    func = click.option(
        "--no-cache", is_flag=True, help="Parse everything again; read and write no cache."
    )(func)
    func = click.option(
        "--cache-dir",
        type=click.Path(path_type=Path),
        default=None,
        help="Where downloads and parsed summaries are kept (default ~/.cache/sgtrace).",
    )(func)
    func = click.option(
        "--source",
        "source",
        default=None,
        metavar="S",
        help="A directory, sglang==X.Y.Z (fetched from PyPI, cached), or nothing "
        "for the installed sglang.",
    )(func)
    return func


def open_project(source: str | None, cache_dir: Path | None, no_cache: bool) -> Project:
    # A whole package leaves millions of objects that only the collector frees; the collection
    # Python runs as it exits took 10 s of a 50 s cold run on SGLang 0.5.23. At exit, after
    # the output is written, they are frozen instead: the process ends without walking them.
    atexit.unregister(gc.freeze)  # registered once, however many commands ran in this process
    atexit.register(gc.freeze)
    tree = open_source(source, cache_dir, progress=_to_stderr)
    # long analyses (a whole package) say how far they are, on stderr, after 2 s of silence
    return Project(tree, cache_dir, use_cache=not no_cache, progress=ThrottledProgress(_to_stderr))


def _to_stderr(line: str) -> None:
    click.echo(line, err=True)


def warn_skipped(project: Project) -> None:
    """Name every file left out of the tree (FIFOs, broken symlinks, unreadable files) and
    every file that could not be parsed, one line each; the analysis went on without them."""
    for skipped in project.index.listing.skipped:
        click.echo(f"warning: skipped {skipped}", err=True)
    for module in sorted(project.index.loaded):
        error = project.index.loaded[module].parse_error
        if error:
            click.echo(f"warning: skipped unparsable file {error}", err=True)
