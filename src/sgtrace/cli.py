"""The ``sgtrace`` command line: thin commands over the library.

Each command parses its options, calls one library function, prints, and turns
:class:`~sgtrace.errors.SgtraceError` (could not run: exit 2) and
:class:`~sgtrace.errors.ProblemFound` (found a problem: exit 1) into messages; ``--debug``
re-raises for a traceback.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from sgtrace.errors import ProblemFound, SgtraceError, UnknownNameError
from sgtrace.graphs.build import Direction, Project, build_call_graph
from sgtrace.graphs.find import FindResult, find_definitions, find_name
from sgtrace.graphs.render import render_dot, render_json, render_svg, render_text
from sgtrace.graphs.source import open_source
from sgtrace.names import QualName

F = TypeVar("F", bound=Callable[..., Any])


class SgtraceClickError(click.ClickException):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def reports_errors(func: F) -> F:
    """Turn sgtrace's errors into click errors with the right exit code (``--debug`` re-raises)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (SgtraceError, ProblemFound) as exc:
            if click.get_current_context().find_root().params.get("debug"):
                raise
            raise SgtraceClickError(str(exc), exc.exit_code) from exc

    return wrapper  # type: ignore[return-value]


def source_options(func: F) -> F:
    func = click.option("--no-cache", is_flag=True, help="Parse everything again; read and write no cache.")(func)
    func = click.option("--cache-dir", type=click.Path(path_type=Path), default=None,
                        help="Where downloads and parsed summaries are kept (default ~/.cache/sgtrace).")(func)
    func = click.option("--source", "source", default=None, metavar="S",
                        help="A directory, sglang==X.Y.Z (fetched from PyPI, cached), or nothing "
                             "for the installed sglang.")(func)
    return func


def open_project(source: str | None, cache_dir: Path | None, no_cache: bool) -> Project:
    return Project(open_source(source, cache_dir), cache_dir, use_cache=not no_cache)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks instead of short error messages.")
@click.version_option(package_name="sgtrace")
def main(debug: bool) -> None:
    """Static and dynamic source tracing for SGLang internals."""


def _focus(project: Project, names: tuple[str, ...]) -> list[QualName]:
    focus: list[QualName] = []
    for name in names:
        definitions = find_definitions(project, name)
        if not definitions:
            find_name(project, name)  # raises UnknownNameError with suggestions
        focus.extend(d.name for d in definitions)
    return focus


@main.command()
@click.argument("targets", nargs=-1)
@source_options
@click.option("--focus", multiple=True, metavar="NAME", help="Start from these functions (name, Class.method or module:qualname).")
@click.option("--depth", type=click.IntRange(min=1), default=None, help="Levels to expand from the focus.")
@click.option("--direction", type=click.Choice([d.value for d in Direction]), default="callees", show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "dot", "svg"]), default=None,
              help="Output format; text on a terminal, json otherwise.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None)
@reports_errors
def callgraph(targets: tuple[str, ...], source: str | None, cache_dir: Path | None, no_cache: bool,
              focus: tuple[str, ...], depth: int | None, direction: str, fmt: str | None,
              output: Path | None) -> None:
    """Build the call graph of TARGETS (paths, file names such as scheduler.py, or modules)."""
    if not targets and not focus:
        raise click.UsageError("give a TARGET (for example scheduler.py) or --focus NAME")
    project = open_project(source, cache_dir, no_cache)
    choice = project.choose_targets(targets)
    if choice.note:
        click.echo(choice.note, err=True)
    graph = build_call_graph(project, targets, _focus(project, focus), depth, Direction(direction))
    fmt = fmt or ("text" if sys.stdout.isatty() and output is None else "json")
    renderers = {"text": lambda g: render_text(g, depth), "json": render_json, "dot": render_dot, "svg": render_svg}
    _emit(renderers[fmt](graph), output)
    warn_skipped(project)


def warn_skipped(project: Project) -> None:
    """Name every file that could not be parsed; the analysis went on without it."""
    for module in sorted(project.index.loaded):
        error = project.index.loaded[module].parse_error
        if error:
            click.echo(f"warning: skipped unparsable file {error}", err=True)


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}", err=True)


def format_find(result: FindResult, fmt: str) -> str:
    if fmt == "json":
        data = {
            "definitions": [{"file": d.file, "line": d.line, "qualname": str(d.name), "kind": d.kind}
                            for d in result.definitions],
            "call_sites": [{"file": s.file, "line": s.line, "caller": str(s.caller), "callee": str(s.callee),
                            "text": s.text, "guard": s.guard, "how": s.how} for s in result.call_sites],
        }
        return json.dumps(data, indent=2, sort_keys=True) + "\n"
    lines = ["definitions:"]
    lines += [f"  {d.file}:{d.line}  {d.name}  ({d.kind})" for d in result.definitions]
    lines.append("call sites:" if result.call_sites else "call sites: none found")
    for s in result.call_sites:
        lines.append(f"  {s.file}:{s.line}  in {s.caller}  -> {s.callee}  [{s.how}]")
        lines.append(f"      {s.text}")
        if s.guard:
            lines.append(f"      guarded by: {s.guard}")
    return "\n".join(lines) + "\n"


@main.command()
@click.argument("name")
@source_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@reports_errors
def find(name: str, source: str | None, cache_dir: Path | None, no_cache: bool, fmt: str) -> None:
    """Definitions of NAME and every call site that resolves to them.

    NAME is a bare name, Class.method or module:qualname. Exit 0 found, 1 not found, 2 usage.
    """
    project = open_project(source, cache_dir, no_cache)
    try:
        result = find_name(project, name)
    except UnknownNameError as exc:
        warn_skipped(project)
        raise ProblemFound(str(exc)) from exc
    click.echo(format_find(result, fmt), nl=False)
    warn_skipped(project)
