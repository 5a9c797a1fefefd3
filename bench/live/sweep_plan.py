#!/usr/bin/env python3
"""The plan of one live sweep (bench/live/sweep.sh): a TOML file, checked, with defaults.

A plan names the servers to compare and how to load, schedule, profile and monitor them. Every
key has a default (``DEFAULTS`` below, the same as ``bench/live/plans/default.toml``); a key the
schema does not know, a value of the wrong type and a server the plan cannot run are refused
with one line that names the key. ``sweep.sh`` reads nothing else: it asks this script for the
resolved values as shell assignments.

    python3 bench/live/sweep_plan.py bench/live/plans/default.toml                # the plan, resolved
    python3 bench/live/sweep_plan.py PLAN --set 'servers.list=["base", "eagle3:high"]'
    python3 bench/live/sweep_plan.py PLAN --print-env                             # what sweep.sh reads

``--set KEY=VALUE`` (repeatable) changes one key for this run; VALUE is a TOML value. A server
is ``KIND[:DRAFT][@tiny][+R]`` (see ``SERVER_KINDS``): DRAFT names a draft of ``models.accept``,
``@tiny`` runs the recipe's tiny random pair (greedy outputs only), ``+R`` a replica. Its label,
the name the results and ``profile.servers`` use, is ``KIND-DRAFT`` (``KIND-tiny`` for ``@tiny``)
plus ``+R``. Stdlib only (the device's python3 runs it); Python 3.11+, or 3.10 with tomli.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import re
import shlex
import sys
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
DEFAULT_PLAN = HERE / "plans" / "default.toml"

# KIND -> what the server is (sweep.sh knows how to start each one)
SERVER_KINDS: dict[str, str] = {
    "base": "no speculation",
    "eagle3": "EAGLE-3",
    "adaptive": "EAGLE-3 with upstream --speculative-adaptive (capped config)",
    "hook": "EAGLE-3 with the sgtrace hook (.carry/sweep/hook, or hook-DRAFT when prepared)",
    "hooktraced": "the hook with the tracer joined (.carry/sweep/hooktraced)",
    "hookoff": "the hook held off at every batch size (.carry/sweep/hookoff)",
    "hookoffup": "hookoff on upstream's extend kernel",
    "hookoffsplit": "hookoff on the split-KV verify kernel",
    "hookoffskip": "hookoff without the draft extend (SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1)",
    "hookcold": "hook without the draft extend while off",
    "hookcoldup": "hookcold with upstream's off step instead of the lean one",
    "eagle3traced": "EAGLE-3 with the tracer alone (.carry/sweep/traced)",
}
SERVER = re.compile(
    r"^(?P<kind>[a-z0-9]+)(?::(?P<draft>\w+))?(?P<tiny>@tiny)?(?:\+(?P<again>\w+))?$"
)
PIN_MODES = ("none", "each", "gpu")


class PlanError(ValueError):
    """The plan cannot be run: the message names the key and what is wrong with it."""


@dataclass(frozen=True)
class Servers:
    list: tuple[str, ...] = ("base", "eagle3:high", "eagle3:low", "adaptive:high")
    # one synthetic 7B server holds ~21 GiB: 7 fit on a 139 GiB H200, 8 did not
    max_synthetic: int = 7


@dataclass(frozen=True)
class Models:
    layers: int = 32  # the synthetic target's depth (Llama-3-8B shape)
    # draft name -> the fraction of the vocabulary it knows (accept length 1 + q + q^2 + q^3)
    accept: dict[str, float] = field(default_factory=lambda: {"high": 0.9, "low": 0.17})


@dataclass(frozen=True)
class Load:
    concurrency: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
    concurrency_traced: tuple[int, ...] = ()  # for *traced servers; empty: concurrency
    warmup_s: float = 1.5
    window_s: float = 2.5
    windows: int = 2
    max_new: int = 128  # new tokens a request
    max_new_spread: float = 0.0  # 0.5: 0.5-1.5x max_new, desynchronised requests
    stream_interval: int = 32  # a chunk every N tokens, counted on arrival; 0: no streaming
    tag: str = ""  # prefix of the sweep lines' tag


@dataclass(frozen=True)
class Schedule:
    rounds: int = 1  # sweep the servers round-robin this many times (A B A B)
    concurrency_repeat: tuple[int, ...] = ()  # levels of rounds 2 and later; empty: concurrency
    reps: int = 0  # > 0: instead of rounds, the servers take turns at each level, reps times


@dataclass(frozen=True)
class Profile:
    servers: tuple[str, ...] = ()  # labels profiled after the sweeps (torch profiler)
    only: tuple[str, ...] = ()  # labels profiled and not swept (each also in servers)
    concurrency: int = 64
    host_side: bool = True  # then 8 steps with the host side and Python stacks
    raw: bool = False  # the first profile records CPU ops too; raw traces back in prof.tgz
    kernels: bool = False  # splitkv_check.py's attention kernel check at the end


@dataclass(frozen=True)
class Host:
    pin: str = "none"  # none | each (own equal share of the CPUs) | gpu (the GPU's NUMA node)
    monitor: bool = True  # host_monitor.py and nvidia-smi through the sweeps
    probe_s: float = 0.1  # CPU probe, seconds a pair; 0: sysfs only


@dataclass(frozen=True)
class Hook:
    log_measurements: bool = True  # a measuring hook logs each measurement at INFO


@dataclass(frozen=True)
class Limits:
    deadline_s: int = 560  # the device call's budget, seconds from the start
    ready_timeout_s: int = 330  # then the sweep goes on with the servers that are ready


@dataclass(frozen=True)
class Paths:
    recipe: str = ".carry/live-sglang"  # the bundle of ../shared/live-sglang
    carry: str = ".carry/sweep"  # what prepare_sweep.py wrote
    logs: str = "/tmp/sweep-logs"
    site: str = "/tmp/site"  # where the bundle is unpacked
    jit_cache: str = "/tmp/jitcache"


@dataclass(frozen=True)
class SweepPlan:
    servers: Servers = Servers()
    models: Models = Models()
    load: Load = Load()
    schedule: Schedule = Schedule()
    profile: Profile = Profile()
    host: Host = Host()
    hook: Hook = Hook()
    limits: Limits = Limits()
    paths: Paths = Paths()

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(server_label(spec) for spec in self.servers.list)


DEFAULTS = SweepPlan()


def server_label(spec: str) -> str:
    """The label of a server spec, as sweep.sh and the results name it.

    >>> [server_label(s) for s in ("base", "eagle3:high", "hook:low+2", "eagle3@tiny")]
    ['base', 'eagle3-high', 'hook-low+2', 'eagle3-tiny']
    """
    m = SERVER.match(spec)
    if m is None:
        raise PlanError(f"servers.list: {spec!r} is not KIND[:DRAFT][@tiny][+R]")
    name = (
        f"{m['kind']}-tiny" if m["tiny"] else m["kind"] + (f"-{m['draft']}" if m["draft"] else "")
    )
    return name + (f"+{m['again']}" if m["again"] else "")


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
        hint = _did_you_mean(unknown[0], sorted(known))
        raise PlanError(f"{key}.{unknown[0]}: unknown key{hint}")
    return cls(**{k: _coerce(v, hints[k], f"{key}.{k}") for k, v in data.items()})


def plan_from_dict(data: dict) -> SweepPlan:
    """A checked plan from parsed TOML: every missing key takes its default."""
    sections = {f.name: f.type for f in dataclasses.fields(SweepPlan)}
    hints = typing.get_type_hints(SweepPlan)
    unknown = sorted(set(data) - set(sections))
    if unknown:
        hint = _did_you_mean(unknown[0], sorted(sections))
        raise PlanError(f"{unknown[0]}: unknown section{hint}")
    plan = SweepPlan(**{k: _section(hints[k], v, k) for k, v in data.items()})
    check(plan)
    return plan


def check(plan: SweepPlan) -> None:
    """What the types cannot say: servers it can start, labels that exist, sane numbers."""
    check_servers(plan)
    check_profile(plan)
    check_numbers(plan)


def check_servers(plan: SweepPlan) -> None:
    """Known kinds, drafts the plan builds, unique labels, no more big servers than fit."""
    if not plan.servers.list:
        raise PlanError("servers.list: empty; name at least one server")
    big = 0
    for spec in plan.servers.list:
        server_label(spec)  # refuses what is not KIND[:DRAFT][@tiny][+R]
        m = SERVER.match(spec)
        assert m is not None
        if m["kind"] not in SERVER_KINDS:
            hint = _did_you_mean(m["kind"], SERVER_KINDS)
            raise PlanError(f"servers.list: {spec!r}: unknown kind {m['kind']!r}{hint}")
        if m["tiny"]:
            continue
        big += 1
        if m["kind"] != "base" and m["draft"] not in plan.models.accept:
            drafts = ", ".join(plan.models.accept) or "none"
            raise PlanError(
                f"servers.list: {spec!r} needs a draft of models.accept ({drafts}), "
                f"written {m['kind']}:DRAFT"
            )
    if big > plan.servers.max_synthetic:
        raise PlanError(
            f"servers.list: {big} synthetic 7B servers do not fit on one GPU together "
            f"(servers.max_synthetic = {plan.servers.max_synthetic}); split them over two plans"
        )
    labels = plan.labels
    if len(set(labels)) != len(labels):
        raise PlanError("servers.list: two servers have the same label; add +R to the replica")


def check_profile(plan: SweepPlan) -> None:
    """Profiled servers are servers of the plan; one profiled only is profiled."""
    labels = plan.labels
    for key, names in (
        ("profile.servers", plan.profile.servers),
        ("profile.only", plan.profile.only),
    ):
        missing = [n for n in names if n not in labels]
        if missing:
            raise PlanError(
                f"{key}: {missing[0]!r} is not a server label; labels: {', '.join(labels)}"
            )
    stray = [n for n in plan.profile.only if n not in plan.profile.servers]
    if stray:
        raise PlanError(
            f"profile.only: {stray[0]!r} is neither swept nor profiled; add it to profile.servers"
        )


def check_numbers(plan: SweepPlan) -> None:
    """Levels of at least one request, counts that can run, fractions, a known pin mode."""
    if plan.host.pin not in PIN_MODES:
        raise PlanError(f"host.pin: {plan.host.pin!r}; one of {', '.join(PIN_MODES)}")
    if not plan.load.concurrency:
        raise PlanError("load.concurrency: empty; name at least one level")
    for key, value in (
        ("load.concurrency", plan.load.concurrency),
        ("load.concurrency_traced", plan.load.concurrency_traced),
        ("schedule.concurrency_repeat", plan.schedule.concurrency_repeat),
    ):
        if any(c < 1 for c in value):
            raise PlanError(f"{key}: levels are numbers of concurrent requests, at least 1")
    for key, number, least in (
        ("schedule.rounds", plan.schedule.rounds, 1),
        ("schedule.reps", plan.schedule.reps, 0),
        ("load.windows", plan.load.windows, 1),
        ("load.window_s", plan.load.window_s, 0.01),
        ("load.max_new", plan.load.max_new, 1),
    ):
        if number < least:
            raise PlanError(f"{key}: {number} is below {least}")
    for draft, q in plan.models.accept.items():
        if not 0.0 <= q <= 1.0:
            raise PlanError(f"models.accept.{draft}: {q} is a fraction of the vocabulary, 0 to 1")


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    """ "; did you mean 'x'?" for the closest choice, else the list of choices."""
    names = list(choices)
    close = difflib.get_close_matches(word, names, n=1)
    return f"; did you mean {close[0]!r}?" if close else f"; one of {', '.join(names)}"


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


def load_plan(path: Path | str, overrides: list[str] | None = None) -> SweepPlan:
    """Read, override and check the plan at ``path``."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlanError(f"{path}: cannot read the plan: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"{path}: not TOML: {exc}") from exc
    try:
        return plan_from_dict(with_overrides(data, overrides or []))
    except PlanError as exc:
        raise PlanError(f"{path}: {exc}") from exc


def _words(values: tuple | list) -> str:
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
        "TAG": load.tag,
        "ROUNDS": str(1 if sched.reps > 0 else sched.rounds),
        "REPS": str(sched.reps),
        "PROFILE": _words(prof.servers),
        "PROFILE_ONLY": _words(prof.only),
        "PROFILE_CONC": str(prof.concurrency),
        "PROFILE_CPU": flag[prof.host_side],
        "PROFILE_RAW": flag[prof.raw],
        "KERNELS": flag[prof.kernels],
        "PIN": {"none": "0", "each": "1", "gpu": "gpu"}[plan.host.pin],
        "MONITOR": flag[plan.host.monitor],
        "PROBE_S": str(plan.host.probe_s),
        "HOOK_LOG_MEASUREMENTS": flag[plan.hook.log_measurements],
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
    args = parser.parse_args(argv)
    try:
        plan = load_plan(args.plan, args.set)
    except PlanError as exc:
        print(f"sweep_plan.py: {exc}", file=sys.stderr)
        return 2
    if args.print_env:
        print("\n".join(f"{k}={shlex.quote(v)}" for k, v in shell_env(plan).items()))
    else:
        print(render_toml(plan), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
