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
from sgtrace.hooks.policy_config import load_policy_config
from sgtrace.hooks.replay import policy_replay
from sgtrace.names import QualName
from sgtrace.tracer.builtin import family_for
from sgtrace.tracer.events import Backend
from sgtrace.tracer.launch import DeepDive, run_traced
from sgtrace.tracer.report import render_report
from sgtrace.tracer.selection import restrict_selection
from sgtrace.tracer.static import selection_from_source
from sgtrace.tracer.validate import validate_trace

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


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("sgtrace-trace"),
              show_default=True, help="Trace directory (may be a generated hook directory: the tracer joins it).")
@click.option("--select", "select", multiple=True, metavar="NAME",
              help="Record only these functions (module:qualname); default: the roles found in the static graph.")
@source_options
@click.option("--backend", type=click.Choice([b.value for b in Backend]), default="auto", show_default=True,
              help="sys.monitoring (3.12+) or sys.setprofile.")
@click.option("--full", is_flag=True, help="Also record every Python call with viztracer around each toggle.")
@click.option("--window", type=click.IntRange(min=1), default=8, show_default=True, help="Steps kept after each toggle with --full.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@reports_errors
def trace(out_dir: Path, select: tuple[str, ...], source: str | None, cache_dir: Path | None, no_cache: bool,
          backend: str, full: bool, window: int, command: tuple[str, ...]) -> None:
    """Run COMMAND (after --) with tracing in every Python process it starts.

    Writes per-process JSONL (flushed per call), a merged Chrome/Perfetto trace.json, and with
    --full viztracer files for the steps around each toggle.
    """
    project = open_project(source, cache_dir, no_cache)
    static = selection_from_source(project, family_for(_release_of(project)))
    for role in static.fallbacks:
        click.echo(f"note: {role.value} not found in the static graph; using the built-in name", err=True)
    selection = static.selection
    if select:
        selection = restrict_selection(selection, [QualName.parse(n) for n in select])
    deep = DeepDive(window=window) if full else None
    run = run_traced(list(command), out_dir, selection, backend=Backend(backend), deep_dive=deep)
    click.echo(f"traced {run.processes} processes, {run.events} events -> {run.chrome_trace}", err=True)
    for note in run.notes:
        click.echo(f"note: {note}", err=True)
    sys.exit(run.returncode)


def _release_of(project: Project) -> str:
    label = project.tree.label
    version = label.split("==", 1)[1].split(" ", 1)[0] if "==" in label else ""
    return version or _version_in_tree(project)


def _version_in_tree(project: Project) -> str:
    for info in sorted(project.tree.root.glob("sglang-*.dist-info")):
        return info.name.removeprefix("sglang-").removesuffix(".dist-info")
    version_file = project.tree.root / "sglang" / "version.py"
    if version_file.is_file():
        for line in version_file.read_text(encoding="utf-8").splitlines():
            if line.startswith("__version__"):
                return line.split("=", 1)[1].strip().strip("\"'")
    raise SgtraceError(f"cannot tell which SGLang release {project.tree.label} is; pass --source sglang==X.Y.Z")


@main.command()
@click.argument("trace_dir", type=click.Path(path_type=Path))
@click.option("--policy", "policy_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also check that decisions follow this policy (TOML or JSON).")
@click.option("--preset", default=None, help="Policy preset to check against (default, batch-size).")
@reports_errors
def validate(trace_dir: Path, policy_file: Path | None, preset: str | None) -> None:
    """Check a trace step by step: off steps ran no multi-step draft, on steps drafted and
    verified, ranks agreed, the draft state stayed current, decisions followed the policy.

    Exit 0 when all hold, 1 with the violations, 2 when the trace cannot be read.
    """
    replay = None
    if policy_file is not None or preset is not None:
        overrides = {"preset": preset} if preset else {}
        replay = policy_replay(load_policy_config(policy_file, overrides))
    verdict = validate_trace(trace_dir, replay=replay)
    click.echo(verdict.render(), nl=False)
    if verdict.exit_code:
        raise ProblemFound(f"{len(verdict.violations)} violation(s) in {trace_dir}")


@main.command()
@click.argument("trace_dir", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The picture: .svg, .png or .html.")
@reports_errors
def report(trace_dir: Path, output: Path) -> None:
    """Draw a trace: per rank over time, batch size, speculation on/off, accept length and
    decode throughput."""
    click.echo(f"wrote {render_report(trace_dir, output)}", err=True)
