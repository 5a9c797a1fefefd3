"""The hook commands: ``inject-hook`` and ``launch``."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from sgtrace.cli.base import open_project, reports_errors, source_options
from sgtrace.errors import SgtraceError
from sgtrace.hooks.apply import (
    AlreadyPresent,
    generate_runtime_hook,
    patch_source,
    refuse_download_cache,
)
from sgtrace.hooks.patch_record import PatchStatus
from sgtrace.hooks.policy_config import load_policy_config
from sgtrace.hooks.sites import locate_sites
from sgtrace.payload.config import HookOptions
from sgtrace.payload.policy import PolicyConfig
from sgtrace.tracer.launch import launch_command, traced_environment

F = TypeVar("F", bound=Callable[..., Any])


def policy_options(func: F) -> F:
    """--policy FILE, --preset and the most used policy keys as flags (flags win over the file)."""
    for name, kind, text in reversed(
        (
            ("--policy", click.Path(dir_okay=False, path_type=Path), "Policy file (TOML or JSON)."),
            (
                "--preset",
                str,
                "default or calibrated (measures its own step times per batch size and state: no threshold to calibrate), threshold (batch-size thresholds and an acceptance gate) or batch-size (thresholds only).",
            ),
            (
                "--on-below",
                int,
                "Threshold policy: speculation on at or below this decode batch size.",
            ),
            (
                "--off-above",
                int,
                "Threshold policy: speculation off at or above this decode batch size.",
            ),
            (
                "--on-delay-steps",
                int,
                "Threshold policy: steps the batch size must stay <= on-below before speculation turns on.",
            ),
            (
                "--min-dwell-steps",
                int,
                "Threshold policy: least steps between two toggles; off at high load does not wait.",
            ),
            ("--min-accept-length", str, "Acceptance gate: least mean accept length, or auto."),
            (
                "--measure",
                str,
                "true: decide by each state's measured goodput per batch-size bucket (TP size 1).",
            ),
        )
    ):
        func = click.option(name, type=kind, default=None, help=text)(func)
    return click.option(
        "--set", "settings", multiple=True, metavar="KEY=VALUE", help="Any other policy key."
    )(func)


def hook_options(func: F) -> F:
    """The hook's behaviour switches (``HookOptions``), each with its default."""
    defaults = HookOptions()
    func = click.option(
        "--catch-up/--no-catch-up",
        default=defaults.catch_up,
        show_default=True,
        help="Switching on, prefill the tokens decoded while off again so that the draft's KV "
        "covers them (one extend a request), instead of a cold start for them.",
    )(func)
    return click.option(
        "--log-measurements/--no-log-measurements",
        default=defaults.log_measurements,
        show_default=True,
        help="Log at INFO, not DEBUG, what the policy measured: each measurement of the measured "
        "policy; the estimates the calibrated one compared where it ends a probe or switches.",
    )(func)


def policy_from(policy: Path | None, settings: tuple[str, ...], **flags: object) -> PolicyConfig:
    overrides: dict[str, object] = {k: v for k, v in flags.items() if v is not None}
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep:
            raise SgtraceError(f"--set {item!r}: write KEY=VALUE, for example --set probe_steps=64")
        overrides[key] = value
    return load_policy_config(policy, overrides)  # type: ignore[arg-type]


@click.command("inject-hook")
@source_options
@click.option(
    "--mode",
    type=click.Choice(["runtime", "patch"]),
    default="runtime",
    show_default=True,
    help="runtime: a directory to put on PYTHONPATH; patch: edit SGLang's source.",
)
@click.option(
    "-o",
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The runtime hook directory (--mode runtime).",
)
@click.option(
    "--write", is_flag=True, help="--mode patch: apply the diff (atomically, with a backup)."
)
@click.option(
    "--revert", is_flag=True, help="--mode patch: restore the patched files byte for byte."
)
@click.option(
    "--diff",
    "show_diff",
    is_flag=True,
    help="--mode patch --revert: print the whole diff of the revert, not a summary.",
)
@policy_options
@hook_options
@reports_errors
def inject_hook(
    source: str | None,
    cache_dir: Path | None,
    no_cache: bool,
    mode: str,
    out_dir: Path | None,
    write: bool,
    revert: bool,
    show_diff: bool,
    policy: Path | None,
    settings: tuple[str, ...],
    log_measurements: bool,
    catch_up: bool,
    **flags: object,
) -> None:
    """Generate the hook that turns speculative decoding off under load and back on when it pays.

    Off runs SGLang's plain decode path, on every release from 0.5.9. The sites are located
    through the call graph of the analysed release, never by line.
    """
    project = open_project(source, cache_dir, no_cache)
    tree = project.tree
    config = policy_from(policy, settings, **flags)
    options = HookOptions(log_measurements, catch_up)
    if mode == "runtime":
        if out_dir is None:
            raise click.UsageError(
                "--mode runtime needs -o DIR (the directory to put on PYTHONPATH)"
            )
        sites = locate_sites(tree, project)
        result = generate_runtime_hook(tree, out_dir, config, sites, options)
        click.echo(f"{result.spec.summary()}\n  does: {result.spec.does()}", err=True)
        state = (
            "unchanged"
            if isinstance(result, AlreadyPresent)
            else "wrote " + ", ".join(result.files)
        )
        click.echo(
            f"{out_dir}: {state}\nrun SGLang with PYTHONPATH={out_dir}{os.pathsep}$PYTHONPATH "
            f"(or: sgtrace launch -o {out_dir} -- python -m sglang.launch_server ...)",
            err=True,
        )
        return
    if write and not revert:
        refuse_download_cache(tree)  # before any analysis writes summaries
    spec = None if revert else locate_sites(tree, project)  # a revert needs no sites
    if spec is not None:
        click.echo(f"  does: {spec.does()}", err=True)
    patched = patch_source(
        tree, config, write=write, revert=revert, show_diff=show_diff, spec=spec, options=options
    )
    if patched.diff:
        click.echo(patched.diff, nl=False)
    if patched.actions:  # the summary is --revert's output unless the diff is asked for
        click.echo(patched.summary(), err=not revert or show_diff)
    notes = {
        PatchStatus.PLANNED: "diff only; nothing written (add --write to apply)",
        PatchStatus.APPLIED: "applied; undo with --revert",
        PatchStatus.ALREADY_PRESENT: "already patched; nothing changed",
        PatchStatus.REVERTED: "reverted byte for byte",
        PatchStatus.NOT_PATCHED: "no sgtrace patch to revert",
    }
    click.echo(
        f"{tree.label}: {notes[patched.status]} ({', '.join(patched.files) or 'no files'})",
        err=True,
    )


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@source_options
@click.option(
    "-o",
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".sgtrace-hook"),
    show_default=True,
    help="Where the runtime hook is written.",
)
@policy_options
@hook_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@reports_errors
def launch(
    source: str | None,
    cache_dir: Path | None,
    no_cache: bool,
    out_dir: Path,
    policy: Path | None,
    settings: tuple[str, ...],
    log_measurements: bool,
    catch_up: bool,
    command: tuple[str, ...],
    **flags: object,
) -> None:
    """Run COMMAND (after --) with the runtime hook installed in every Python process it starts.

    Example: sgtrace launch --preset batch-size -- python -m sglang.launch_server --model-path M ...
    """
    project = open_project(source, cache_dir, no_cache)
    spec = locate_sites(project.tree, project)
    policy_config = policy_from(policy, settings, **flags)
    options = HookOptions(log_measurements, catch_up)
    generate_runtime_hook(project.tree, out_dir, policy_config, spec, options)
    sys.exit(launch_command(list(command), traced_environment(out_dir, os.environ)))
