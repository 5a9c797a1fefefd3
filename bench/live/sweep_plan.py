#!/usr/bin/env python3
"""The plan of one live sweep (bench/live/sweep.sh): a TOML file, checked, with defaults.

A plan names the servers to compare and how to load, schedule, profile and monitor them. Every
key has a default (``plan_schema.py``'s ``DEFAULTS``, the same as
``bench/live/plans/default.toml``); a key the schema does not know, a value of the wrong type, a
server the plan cannot run, a plan without an A/A pair (two identical servers) and one that would
not end within its deadline are refused with one line that names the key (``plan_checks.py``).
``sweep.sh`` reads nothing else: it asks this script for the resolved values as shell
assignments.

    python3 bench/live/sweep_plan.py bench/live/plans/default.toml                # the plan, resolved
    python3 bench/live/sweep_plan.py PLAN --set 'load.concurrency=[1, 64]'
    python3 bench/live/sweep_plan.py PLAN --print-env                             # what sweep.sh reads
    python3 bench/live/sweep_plan.py PLAN --estimate     # seconds per phase; exit 1: does not fit

``--set KEY=VALUE`` (repeatable) changes one key for this run; VALUE is a TOML value. A server
is ``KIND[:DRAFT][@tiny][+R]`` (see ``SERVER_KINDS``): DRAFT names a draft of ``models.accept``,
``@tiny`` runs the recipe's tiny random pair (greedy outputs only), ``+R`` a replica. Its label,
the name the results and ``profile.servers`` use, is ``KIND-DRAFT`` (``KIND-tiny`` for ``@tiny``)
plus ``+R``. Stdlib only (the device's python3 runs it); Python 3.11+, or 3.10 with tomli.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
import typing
from collections.abc import Iterable
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from plan_checks import check
from plan_estimate import fits, render_estimate
from plan_schema import (  # noqa: F401 (the schema, re-exported: sweep_plan.X as before)
    DEFAULTS,
    PIN_MODES,
    SERVER,
    SERVER_KINDS,
    Hook,
    Host,
    Limits,
    Load,
    Models,
    Paths,
    PlanError,
    Profile,
    Schedule,
    Servers,
    SweepPlan,
    did_you_mean,
    server_label,
)

HERE = Path(__file__).resolve().parent
DEFAULT_PLAN = HERE / "plans" / "default.toml"


def _coerce(value: object, hint: object, key: str) -> object:
    """``value`` as the field's type, or a PlanError naming ``key`` (TOML ints pass as floats)."""
    origin = typing.get_origin(hint)
    if origin is tuple:
        (item, _) = typing.get_args(hint)
        if not isinstance(value, list):
            raise PlanError(f"{key}: expected a list, got {value!r}")
        return tuple(_coerce(v, item, f"{key}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        _, item = typing.get_args(hint)
        if not isinstance(value, dict):
            raise PlanError(f"{key}: expected a table, got {value!r}")
        return {str(k): _coerce(v, item, f"{key}.{k}") for k, v in value.items()}
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint is int and isinstance(value, bool) or not isinstance(value, hint):  # type: ignore[arg-type]
        name = getattr(hint, "__name__", str(hint))
        raise PlanError(f"{key}: expected {name}, got {value!r}")
    return value


def _section(cls: type, data: object, key: str) -> object:
    """One table of the plan as its dataclass; unknown keys refused."""
    if not isinstance(data, dict):
        raise PlanError(f"{key}: expected a table, got {data!r}")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        hint = did_you_mean(unknown[0], sorted(known))
        raise PlanError(f"{key}.{unknown[0]}: unknown key{hint}")
    return cls(**{k: _coerce(v, hints[k], f"{key}.{k}") for k, v in data.items()})


def plan_from_dict(data: dict, *, fit: bool = True) -> SweepPlan:
    """A checked plan from parsed TOML: every missing key takes its default; ``fit``: refused
    when it would not end within its deadline (plan_checks.check_fits)."""
    sections = {f.name: f.type for f in dataclasses.fields(SweepPlan)}
    hints = typing.get_type_hints(SweepPlan)
    unknown = sorted(set(data) - set(sections))
    if unknown:
        hint = did_you_mean(unknown[0], sorted(sections))
        raise PlanError(f"{unknown[0]}: unknown section{hint}")
    parts: dict[str, typing.Any] = {k: _section(hints[k], v, k) for k, v in data.items()}
    plan = SweepPlan(**parts)
    check(plan, fit=fit)
    return plan


def with_overrides(data: dict, overrides: list[str]) -> dict:
    """``data`` with each ``section.key=TOML value`` of ``overrides`` set."""
    for item in overrides:
        key, sep, text = item.partition("=")
        parts = key.strip().split(".")
        if not sep or len(parts) != 2:
            raise PlanError(f"--set {item!r}: expected SECTION.KEY=VALUE, e.g. load.windows=3")
        try:
            value = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            value = text  # a bare word: a string
        data.setdefault(parts[0], {})
        if not isinstance(data[parts[0]], dict):
            raise PlanError(f"--set {item!r}: {parts[0]} is not a table")
        data[parts[0]][parts[1]] = value
    return data


def load_plan(
    path: Path | str, overrides: list[str] | None = None, *, fit: bool = True
) -> SweepPlan:
    """Read, override and check the plan at ``path`` (``fit``: see plan_from_dict)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlanError(f"{path}: cannot read the plan: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"{path}: not TOML: {exc}") from exc
    try:
        return plan_from_dict(with_overrides(data, overrides or []), fit=fit)
    except PlanError as exc:
        raise PlanError(f"{path}: {exc}") from exc


def _words(values: Iterable[object]) -> str:
    return " ".join(str(v) for v in values)


def shell_env(plan: SweepPlan) -> dict[str, str]:
    """The resolved values sweep.sh reads, by its variable names (empty lists resolved)."""
    load, sched, prof = plan.load, plan.schedule, plan.profile
    conc = ",".join(map(str, load.concurrency))
    flag = {True: "1", False: "0"}
    return {
        "SERVERS": _words(plan.servers.list),
        "MAX_SERVERS": str(plan.servers.max_synthetic),
        "LAYERS": str(plan.models.layers),
        "ACCEPT": _words(f"{d}={q}" for d, q in plan.models.accept.items()),
        "CONC": conc,
        "CONC_TRACED": ",".join(map(str, load.concurrency_traced)) or conc,
        "CONC_REPEAT": ",".join(map(str, sched.concurrency_repeat)) or conc,
        "WARMUP_S": str(load.warmup_s),
        "WINDOW_S": str(load.window_s),
        "WINDOWS": str(load.windows),
        "MAX_NEW": str(load.max_new),
        "MAX_NEW_SPREAD": str(load.max_new_spread),
        "STREAM_INTERVAL": str(load.stream_interval),
        "FIXED": str(load.fixed_requests),
        "FIXED_BATCH": flag[load.fixed_batch],
        "FIXED_TOKENS": str(load.fixed_tokens),
        "TAG": load.tag,
        "ROUNDS": str(1 if sched.reps > 0 else sched.rounds),
        "REPS": str(sched.reps),
        "WARMUP_TURNS": str(sched.warmup_turns),
        "PROFILE": _words(prof.servers),
        "PROFILE_ONLY": _words(prof.only),
        "PROFILE_CONC": str(prof.concurrency),
        "PROFILE_CPU": flag[prof.host_side],
        "PROFILE_RAW": flag[prof.raw],
        "KERNELS": flag[prof.kernels],
        "PIN": {"none": "0", "each": "1", "gpu": "gpu"}[plan.host.pin],
        "MONITOR": flag[plan.host.monitor],
        "PROBE_S": str(plan.host.probe_s),
        "GC_WARNING_S": str(plan.host.gc_warning_s),
        "FREEZE_GC": flag[plan.host.freeze_gc],
        "DEADLINE_S": str(plan.limits.deadline_s),
        "READY_TIMEOUT_S": str(plan.limits.ready_timeout_s),
        "RECIPE": plan.paths.recipe,
        "CARRY": plan.paths.carry,
        "LOGS": plan.paths.logs,
        "SITE": plan.paths.site,
        "JITC": plan.paths.jit_cache,
    }


def render_toml(plan: SweepPlan) -> str:
    """The resolved plan as TOML (what ran, for run.log)."""

    def value(v: object) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, tuple):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
        return str(v)

    out = []
    for section in dataclasses.fields(plan):
        part = getattr(plan, section.name)
        out += [f"[{section.name}]"]
        out += [f"{f.name} = {value(getattr(part, f.name))}" for f in dataclasses.fields(part)]
        out += [""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", nargs="?", default=str(DEFAULT_PLAN), help="a TOML sweep plan")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--print-env", action="store_true", help="shell assignments for sweep.sh")
    parser.add_argument(
        "--estimate", action="store_true", help="how long the plan runs; exit 1 if it does not fit"
    )
    args = parser.parse_args(argv)
    try:
        plan = load_plan(args.plan, args.set, fit=not args.estimate)
    except PlanError as exc:
        print(f"sweep_plan.py: {exc}", file=sys.stderr)
        return 2
    if args.estimate:
        print(render_estimate(plan), end="")
        return 0 if fits(plan) else 1
    if args.print_env:
        print("\n".join(f"{k}={shlex.quote(v)}" for k, v in shell_env(plan).items()))
    else:
        print(render_toml(plan), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
