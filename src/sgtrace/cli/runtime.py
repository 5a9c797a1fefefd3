"""The runtime commands: ``trace``, ``validate`` and ``report``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sgtrace.cli.base import open_project, reports_errors, source_options
from sgtrace.errors import ProblemFound
from sgtrace.hooks.policy_config import load_policy_config
from sgtrace.hooks.replay import policy_replay
from sgtrace.names import QualName
from sgtrace.tracer.events import Backend
from sgtrace.tracer.launch import DeepDive, run_traced
from sgtrace.tracer.load import load_trace
from sgtrace.tracer.report import draw_trace
from sgtrace.tracer.rules import OffState, step_rules_for
from sgtrace.tracer.selection import restrict_selection
from sgtrace.tracer.static import selection_from_source
from sgtrace.tracer.validate import validate_trace


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("sgtrace-trace"),
    show_default=True,
    help="Trace directory (may be a generated hook directory: the tracer joins it).",
)
@click.option(
    "--select",
    "select",
    multiple=True,
    metavar="NAME",
    help="Record only these functions (module:qualname); default: the roles found in the static graph.",
)
@source_options
@click.option(
    "--backend",
    type=click.Choice([b.value for b in Backend]),
    default="auto",
    show_default=True,
    help="sys.monitoring (3.12+) or sys.setprofile.",
)
@click.option(
    "--full", is_flag=True, help="Also record every Python call with viztracer around each toggle."
)
@click.option(
    "--window",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Steps kept after each toggle with --full.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@reports_errors
def trace(
    out_dir: Path,
    select: tuple[str, ...],
    source: str | None,
    cache_dir: Path | None,
    no_cache: bool,
    backend: str,
    full: bool,
    window: int,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND (after --) with tracing in every Python process it starts.

    Writes per-process JSONL (flushed per call), a merged Chrome/Perfetto trace.json, and with
    --full viztracer files for the steps around each toggle.
    """
    project = open_project(source, cache_dir, no_cache)
    static = selection_from_source(project)
    for role in static.fallbacks:
        click.echo(
            f"note: {role.value} not found in the static graph; using the map's name", err=True
        )
    for role in static.missing:
        click.echo(f"note: {role.value} not found in the static graph; not recorded", err=True)
    selection = static.selection
    if select:
        selection = restrict_selection(selection, [QualName.parse(n) for n in select])
    deep = DeepDive(window=window) if full else None
    run = run_traced(list(command), out_dir, selection, backend=Backend(backend), deep_dive=deep)
    click.echo(
        f"traced {run.processes} processes, {run.events} events -> {run.chrome_trace}", err=True
    )
    for note in run.notes:
        click.echo(f"note: {note}", err=True)
    sys.exit(run.returncode)


@click.command()
@click.argument("trace_dir", type=click.Path(path_type=Path))
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also check that decisions follow this policy (TOML or JSON).",
)
@click.option(
    "--preset",
    default=None,
    help="Policy preset to check against (default, calibrated, threshold, batch-size).",
)
@click.option(
    "--off-state",
    type=click.Choice([state.value for state in OffState]),
    default=None,
    help="What the hook's off ran (default: what the sgtrace_hook.json beside the trace says; "
    "plain where there is none): plain off steps run no draft, verify or draft extend at all; "
    "zero-step (upstream's, and hooks before the plain off state) a one-token verify.",
)
@reports_errors
def validate(
    trace_dir: Path, policy_file: Path | None, preset: str | None, off_state: str | None
) -> None:
    """Check a trace step by step: off steps ran no multi-step draft, on steps drafted and
    verified, ranks agreed, the draft state stayed current, decisions followed the policy.

    Exit 0 when all hold, 1 with the violations, 2 when the trace cannot be read.
    """
    replay = None
    if policy_file is not None or preset is not None:
        overrides = {"preset": preset} if preset else {}
        replay = policy_replay(load_policy_config(policy_file, overrides))
    rules = step_rules_for(OffState(off_state)) if off_state else None  # None: the config's
    verdict = validate_trace(trace_dir, rules=rules, replay=replay)
    click.echo(verdict.render())
    if verdict.exit_code:
        raise ProblemFound(f"{len(verdict.violations)} violation(s) in {trace_dir}")


@click.command()
@click.argument("trace_dir", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The picture: .svg, .png or .html.",
)
@reports_errors
def report(trace_dir: Path, output: Path) -> None:
    """Draw a trace: per rank over time, batch size, speculation on/off, accept length and
    decode throughput."""
    trace = load_trace(trace_dir)
    for warning in trace.warnings:  # lines the loader skipped, one each
        click.echo(f"warning: {warning}", err=True)
    click.echo(f"wrote {draw_trace(trace, trace_dir, output)}", err=True)
