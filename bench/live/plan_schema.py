"""The schema of a live sweep plan (bench/live/sweep.sh): its sections, keys and defaults.

Values only: ``sweep_plan.py`` reads a TOML file into these, ``plan_checks.py`` refuses what
cannot run, ``plan_estimate.py`` says how long it runs. Stdlib only (the device's python3).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

# KIND -> what the server is (sweep.sh knows how to start each one)
SERVER_KINDS: dict[str, str] = {
    "base": "no speculation",
    "eagle3": "EAGLE-3",
    "adaptive": "EAGLE-3 with upstream --speculative-adaptive (capped config)",
    "hook": "EAGLE-3 with the sgtrace hook (.carry/sweep/hook, or hook-DRAFT when prepared)",
    "hooktraced": "the hook with the tracer joined (.carry/sweep/hooktraced)",
    "plainoff": "the hook held off at every batch size: what off costs (.carry/sweep/plainoff)",
    "cal": "the hook with the calibrated policy's defaults (--preset calibrated, .carry/sweep/cal)",
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
    # an A/A pair (``base`` and ``base+aa``: two identical servers) shows the noise floor
    list: tuple[str, ...] = ("base", "base+aa", "eagle3:high")
    # one synthetic 7B server holds ~21 GiB: 7 fit on a 139 GiB H200, 8 did not
    max_synthetic: int = 7
    # why this plan runs without an A/A pair ("" : it must have one; checks.check_aa_pair)
    aa_pair_waived: str = ""


@dataclass(frozen=True)
class Models:
    layers: int = 32  # the synthetic target's depth (Llama-3-8B shape)
    # draft name -> the fraction of the vocabulary it knows (accept length 1 + q + q^2 + q^3)
    accept: dict[str, float] = field(default_factory=lambda: {"high": 0.9, "low": 0.17})


@dataclass(frozen=True)
class Load:
    # four levels: each server gets 6 turns of 3 s at each within one device call
    concurrency: tuple[int, ...] = (1, 8, 32, 128)
    concurrency_traced: tuple[int, ...] = ()  # for *traced servers; empty: concurrency
    warmup_s: float = 1.0  # each turn, not counted: the server wakes, a policy settles
    window_s: float = 3.0
    windows: int = 1  # a turn's windows are not independent: the report pairs whole turns
    max_new: int = 128  # new tokens a request
    max_new_spread: float = 0.0  # 0.5: 0.5-1.5x max_new, desynchronised requests
    stream_interval: int = 32  # a chunk every N tokens, counted on arrival; 0: no streaming
    # > 0: fixed work instead of windows (sweep_load.py --fixed): a turn is each of the C
    # workers sending this many requests back to back; rate = tokens / time to finish them all
    # (warmup_s, window_s, windows and stream_interval unused then)
    fixed_requests: int = 0
    # fixed work: each worker sends more requests where C x fixed_requests x max_new is below
    # this many new tokens a turn (sweep_fixed.requests_at: 512 gives four waves at 1, two at
    # 2); 0: fixed_requests at every level
    fixed_tokens: int = 0
    # fixed work: each wave one /generate call of the C prompts, which SGLang hands to the
    # scheduler as one message (one prefill batch; sweep_fixed.py), not C calls
    fixed_batch: bool = False
    tag: str = ""  # prefix of the sweep lines' tag


@dataclass(frozen=True)
class Schedule:
    rounds: int = 1  # sweep the servers round-robin this many times (A B A B)
    concurrency_repeat: tuple[int, ...] = ()  # levels of rounds 2 and later; empty: concurrency
    # > 0: instead of rounds, the servers take turns at each level, reps times; the paired
    # standard error is over these turns
    reps: int = 6
    # with reps: turns of every server at each level before its reps, not scored (the first
    # turn at a batch size compiles its kernels and holds a policy's first decisions there;
    # sweep_load.py --warmup-turns)
    warmup_turns: int = 0


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
    # SGLang's front process logs each garbage collection longer than this ("LONG GARBAGE
    # COLLECTION DETECTED", --gc-warning-threshold-secs); 0: not asked
    gc_warning_s: float = 0.05
    # after its greedy check, each server's collector frozen (SGLang's /freeze_gc: the front's
    # and the scheduler's objects then are never scanned again), before any turn
    freeze_gc: bool = False


@dataclass(frozen=True)
class Hook:
    # a measuring hook logs each measurement at INFO: written into the hook directories by
    # prepare_sweep.py --plan (the hook's log_measurements option)
    log_measurements: bool = True


@dataclass(frozen=True)
class Limits:
    deadline_s: int = 570  # the device call's budget, seconds from the start (600 at most)
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


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """ "; did you mean 'x'?" for the closest choice, else the list of choices."""
    names = list(choices)
    close = difflib.get_close_matches(word, names, n=1)
    return f"; did you mean {close[0]!r}?" if close else f"; one of {', '.join(names)}"
