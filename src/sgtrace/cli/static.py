"""The static commands: ``callgraph`` and ``find``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from sgtrace.cli.base import open_project, reports_errors, source_options, warn_skipped
from sgtrace.errors import OutputFormatError, ProblemFound, UnknownNameError
from sgtrace.graphs.build import Direction, Project, cached_rendering
from sgtrace.graphs.find import FindResult, find_definitions, find_name
from sgtrace.graphs.render import render_dot, render_json, render_svg, render_text
from sgtrace.names import QualName


def _focus(project: Project, names: tuple[str, ...]) -> list[QualName]:
    focus: list[QualName] = []
    for name in names:
        definitions = find_definitions(project, name)
        if not definitions:
            find_name(project, name)  # raises UnknownNameError with suggestions
        focus.extend(d.name for d in definitions)
    return focus


DEFAULT_FOCUS_DEPTH = 3
FORMATS = ("text", "json", "dot", "svg")
SUFFIX_FORMATS = {".svg": "svg", ".dot": "dot", ".gv": "dot", ".json": "json", ".txt": "text"}


def choose_format(fmt: str | None, output: Path | None, is_terminal: bool) -> str:
    """The output format: ``--format``, else the extension of ``-o``, else text on a terminal
    and JSON otherwise. ``--format`` contradicting the extension, or an ``-o`` whose extension
    names no format, is refused (exit 2) rather than written in a format its name belies.

    >>> choose_format(None, Path("graph.svg"), False)
    'svg'
    """
    if output is None:
        return fmt or ("text" if is_terminal else "json")
    implied = SUFFIX_FORMATS.get(output.suffix.lower())
    names = ", ".join(SUFFIX_FORMATS)
    if implied is None and fmt is None:
        raise OutputFormatError(
            f"cannot tell the format of {output} from its extension; name it {names} "
            f"or give --format ({', '.join(FORMATS)})"
        )
    if fmt is not None and implied is not None and fmt != implied:
        raise OutputFormatError(
            f"--format {fmt} contradicts -o {output} (a {output.suffix} file holds {implied}); "
            f"drop --format, or name the file {output.with_suffix('.' + _suffix(fmt))}"
        )
    return fmt or str(implied)


def _suffix(fmt: str) -> str:
    return {"text": "txt"}.get(fmt, fmt)


@click.command()
@click.argument("targets", nargs=-1)
@source_options
@click.option(
    "--focus",
    multiple=True,
    metavar="NAME",
    help="Start from these functions (name, Class.method or module:qualname).",
)
@click.option(
    "--depth",
    type=click.IntRange(min=1),
    default=None,
    help=f"Levels to expand from the focus (default {DEFAULT_FOCUS_DEPTH} with --focus; "
    "without it, the targets' own calls).",
)
@click.option(
    "--direction",
    type=click.Choice([d.value for d in Direction]),
    default="callees",
    show_default=True,
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="Output format; default: from -o's extension (.svg .dot .gv .json .txt), else text "
    "on a terminal and json otherwise.",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None)
@reports_errors
def callgraph(
    targets: tuple[str, ...],
    source: str | None,
    cache_dir: Path | None,
    no_cache: bool,
    focus: tuple[str, ...],
    depth: int | None,
    direction: str,
    fmt: str | None,
    output: Path | None,
) -> None:
    """Build the call graph of TARGETS (paths, directories, file names such as scheduler.py,
    or dotted modules and packages)."""
    if not targets and not focus:
        raise click.UsageError("give a TARGET (for example scheduler.py) or --focus NAME")
    fmt = choose_format(fmt, output, sys.stdout.isatty())
    if focus and depth is None:
        depth = DEFAULT_FOCUS_DEPTH
    project = open_project(source, cache_dir, no_cache)
    choice = project.choose_targets(targets)
    if choice.note:
        click.echo(choice.note, err=True)
    renderers = {
        "text": lambda g: render_text(g, depth),
        "json": render_json,
        "dot": render_dot,
        "svg": render_svg,
    }
    form = None if fmt == "svg" else fmt  # Graphviz draws the SVG: it is not kept in the cache
    request = (targets, _focus(project, focus), depth, Direction(direction))
    _emit(cached_rendering(project, renderers[fmt], form, *request), output)
    warn_skipped(project)


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}", err=True)


def format_find(result: FindResult, fmt: str) -> str:
    if fmt == "json":
        data = {
            "definitions": [
                {"file": d.file, "line": d.line, "qualname": str(d.name), "kind": d.kind}
                for d in result.definitions
            ],
            "call_sites": [
                {
                    "file": s.file,
                    "line": s.line,
                    "caller": str(s.caller),
                    "callee": str(s.callee),
                    "text": s.text,
                    "guard": s.guard,
                    "how": s.how,
                }
                for s in result.call_sites
            ],
        }
        return json.dumps(data, indent=2, sort_keys=True) + "\n"
    lines = ["definitions:"]
    lines += [f"  {d.file}:{d.line}  {d.name}  ({d.kind})" for d in result.definitions]
    lines.append("call sites:" if result.call_sites else "call sites: none found")
    for s in result.grouped_sites():
        targets = [f"{t.callee}  [{t.how}]" for t in s.targets]
        head = f"  {s.file}:{s.line}  in {s.caller}  -> "
        if len(targets) == 1:
            lines.append(head + targets[0])
        else:  # the site once, then each definition it may reach
            lines += [head + f"{len(targets)} targets:", *(f"      -> {t}" for t in targets)]
        lines.append(f"      {s.text}")
        if s.guard:
            lines.append(f"      guarded by: {s.guard}")
    return "\n".join(lines) + "\n"


@click.command()
@click.argument("name")
@source_options
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
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
