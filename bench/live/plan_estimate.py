"""How long a sweep plan runs on the device, from its levels, turns, windows and start-up costs.

A device call ends after 600 s whatever it is doing, so a plan is checked to fit before it runs
(``python3 bench/live/sweep_plan.py PLAN --estimate``; ``sweep.sh`` refuses a plan that does not
fit its ``limits.deadline_s``). The costs of the phases that do not depend on the plan's numbers
were read from the run.log of the recorded calls 1-25 (``bench/results/live/sweep/callN``):
``TYPICAL`` is their median, ``SLOWEST`` the slowest recorded, which the check uses. A
fixed-work turn is sized per server: a plain step, or a speculating server's step over its
draft's accept length, a wave the expected longest of its requests' lengths. Calls 49-55's
levels took 0.65-0.83 of the typical estimate on an H200 (49-53), 0.98-1.21 on an H100 (54-55),
0.43-0.84 of the slowest; 0.46-0.77 of the typical estimate that sized every server plain.

    >>> from plan_schema import DEFAULTS
    >>> round(estimate(DEFAULTS, SLOWEST).total_s)
    545
"""

from __future__ import annotations

from dataclasses import dataclass

from plan_schema import SERVER, SweepPlan
from sweep_fixed import FIXED_WARMUP_TOKENS, requests_at


@dataclass(frozen=True)
class Costs:
    """Seconds of the phases a plan does not size (recorded, calls 1-25)."""

    build_s: float  # bundle unpacked, synthetic models built and checked (27-44 s from the start)
    tiny_build_s: float  # the recipe's tiny random pair, when a server runs it (5-6 s)
    ready_s: float  # the servers, started together, all ready (69-137 s after their start)
    greedy_s: float  # one server's greedy check, 16 prompts twice (2-4 s)
    turn_overhead_s: float  # a turn beyond its warm-up and windows: settle 0.3 s + tail 0-1 s
    probe_s: float  # host_monitor.py's CPU probe before the servers start
    kernels_s: float  # splitkv_check.py
    pack_s: float  # monitors stopped, logs packed
    # fixed work (load.fixed_requests): a wave of C requests on the synthetic 7B target takes
    # max_new x (token_ms + C x token_ms_per_request) after a prefill of prefill_s + C x
    # prefill_s_per_request, and a turn fixed_overhead_s beyond its two waves (warm-up, work).
    # From the fixed-work call 1 (bench/results/live/plain_cost_0.5.16/fixed_call1): a wave of
    # 128 tokens took 0.61 s at 1, 0.65 at 2-8, 0.69 at 16, 0.75 at 32, 0.87 at 64, 1.14 at 128;
    # the 4-token warm-up wave 0.05-0.09 s at 1-16, 0.11 at 32, 0.25 at 64, 0.34 at 128 (one of
    # 0.66); a turn 0.41 s beyond the two. A target of fewer layers than DEPTH steps in that
    # share of token_ms (calls 49-53, 24 layers on an H200: 3.6 ms a plain step at 1)
    token_ms: float
    token_ms_per_request: float
    prefill_s: float
    prefill_s_per_request: float
    fixed_overhead_s: float
    # a speculating server's step (a draft, then a verify of 4 tokens a request) against a
    # plain one's at C requests: verify_step + C x verify_step_per_request; it makes accept
    # length tokens. Calls 49-53: EAGLE-3's step 1.47 plain steps at 1, 1.8 at 16, 4.6 at 128
    verify_step: float
    verify_step_per_request: float


TYPICAL = Costs(
    build_s=35.0,
    tiny_build_s=6.0,
    ready_s=107.0,
    greedy_s=3.0,
    turn_overhead_s=0.45,
    probe_s=2.0,
    kernels_s=20.0,
    pack_s=5.0,
    token_ms=4.6,
    token_ms_per_request=0.032,
    prefill_s=0.05,
    prefill_s_per_request=0.0025,
    fixed_overhead_s=0.41,
    verify_step=1.45,
    verify_step_per_request=0.025,
)
SLOWEST = Costs(
    build_s=45.0,
    tiny_build_s=10.0,
    ready_s=137.0,  # fixed call 1: 185 s, compiling its JIT kernels (no cache carried)
    greedy_s=4.0,
    turn_overhead_s=0.6,
    probe_s=10.0,
    kernels_s=30.0,
    pack_s=10.0,
    token_ms=6.0,  # an H100: 4.5 ms a plain step of the 24-layer target at 1 (calls 54-55)
    token_ms_per_request=0.05,
    prefill_s=0.1,
    prefill_s_per_request=0.004,
    fixed_overhead_s=0.5,
    verify_step=1.6,
    verify_step_per_request=0.0275,
)
DEPTH = 32  # the layers of the target token_ms was recorded on
DRAFT_STEPS = 3  # speculative_num_steps of the recipe: accept length 1 + q + ... + q^3
PLAIN_KINDS = frozenset({"base", "plainoff"})  # plainoff: the hook held off
HOOK_KINDS = frozenset({"hook", "hooktraced", "cal"})  # settle on the faster of the two states
PROFILE_WAIT_S = 8.0  # after a profile's load: traces written (up to 30 s polled), summaries
# the standard deviation of one turn's paired difference: identical servers at 1-8 requests
# (calls 23, 25: 1-4%), two speculating servers at 1-128 (calls 21, 24: 2-18%); turns of 2.5 s
TURN_SD_PCT = (2.0, 4.0, 8.0)


@dataclass(frozen=True)
class Phase:
    name: str
    seconds: float


@dataclass(frozen=True)
class Estimate:
    """The phases of one device call in the order they run, and what a level measures."""

    phases: tuple[Phase, ...]
    turn_s: float  # one turn: warm-up, windows and the overhead
    measured_s: float  # seconds of windows per server and level, all its turns together

    @property
    def total_s(self) -> float:
        return sum(p.seconds for p in self.phases)


def swept(plan: SweepPlan) -> tuple[str, ...]:
    """The specs whose throughput is measured: synthetic servers not profiled only."""
    only = set(plan.profile.only)
    out = []
    for spec, label in zip(plan.servers.list, plan.labels, strict=True):
        m = SERVER.match(spec)
        if m is not None and not m["tiny"] and label not in only:
            out.append(spec)
    return tuple(out)


def turns(plan: SweepPlan) -> tuple[tuple[str, int], ...]:
    """(what, number of turns) of the sweep: levels times servers times turns each.

    With ``schedule.reps`` the servers take turns at each level; else each server sweeps its
    levels once a round (``concurrency_repeat`` from round 2, ``concurrency_traced`` for
    ``*traced`` servers), as sweep.sh runs them.
    """
    servers, load, sched = swept(plan), plan.load, plan.schedule
    if sched.reps > 0:
        each = sched.reps + sched.warmup_turns
        n = len(load.concurrency) * len(servers) * each
        return ((f"{len(load.concurrency)} levels x {len(servers)} servers x {each} turns", n),)
    count = 0
    for round_ in range(1, sched.rounds + 1):
        for spec in servers:
            levels = load.concurrency
            if round_ > 1 and sched.concurrency_repeat:
                levels = sched.concurrency_repeat
            if "traced" in spec.partition(":")[0] and load.concurrency_traced:
                levels = load.concurrency_traced
            count += len(levels)
    return ((f"{len(servers)} servers x {sched.rounds} rounds of their levels", count),)


def token_s(plan: SweepPlan, costs: Costs, conc: int, spec: str = "base") -> float:
    """Seconds a token of one request among ``conc`` takes on server ``spec``: a plain step, or
    a speculating one's step over its draft's accept length (``models.accept``); a hook the
    faster of the two. A server of no known draft is estimated plain."""
    plain = (costs.token_ms + conc * costs.token_ms_per_request) / 1000
    plain *= plan.models.layers / DEPTH
    m = SERVER.match(spec)
    q = plan.models.accept.get(m["draft"]) if m is not None and m["draft"] else None
    if m is None or m["kind"] in PLAIN_KINDS or q is None or m["tiny"]:
        return plain
    accept = sum(q**k for k in range(DRAFT_STEPS + 1))
    speculating = plain * (costs.verify_step + conc * costs.verify_step_per_request) / accept
    return min(plain, speculating) if m["kind"] in HOOK_KINDS else speculating


def request_s(
    plan: SweepPlan, costs: Costs, conc: int, new_tokens: float, spec: str = "base"
) -> float:
    """One request of ``new_tokens`` among ``conc`` concurrent ones, its prefill included."""
    prefill = costs.prefill_s + conc * costs.prefill_s_per_request
    return prefill + new_tokens * token_s(plan, costs, conc, spec)


def fixed_turn_s(plan: SweepPlan, costs: Costs, conc: int, spec: str = "base") -> float:
    """A fixed-work turn of server ``spec`` at ``conc``: the warm-up wave, then each worker's
    requests back to back (a wave lasts its longest request: of ``conc`` lengths drawn
    uniformly over ``max_new`` times 1 -/+ ``max_new_spread``, the expected largest)."""
    load = plan.load
    spread = load.max_new_spread
    longest = load.max_new * (1 - spread + 2 * spread * conc / (conc + 1))
    warm = request_s(plan, costs, conc, FIXED_WARMUP_TOKENS, spec)
    requests = requests_at(load.fixed_requests, load.fixed_tokens, conc, load.max_new)
    work = requests * request_s(plan, costs, conc, longest, spec)
    return warm + work + costs.fixed_overhead_s


def fixed_phases(plan: SweepPlan, costs: Costs) -> list[Phase]:
    """The sweep of a fixed-work plan, one phase a level (a turn's time grows with it), each
    server's turns at its own speed."""
    sched, levels, servers = plan.schedule, plan.load.concurrency, swept(plan)
    each = sched.reps + sched.warmup_turns if sched.reps > 0 else sched.rounds
    phases = []
    for conc in levels:
        turns_s = [fixed_turn_s(plan, costs, conc, spec) for spec in servers]
        span = f"{min(turns_s):.2f}-{max(turns_s):.2f}" if servers else "0.00"
        phases.append(
            Phase(f"level {conc}: {len(servers) * each} turns, {span} s each", each * sum(turns_s))
        )
    return phases


def estimate(plan: SweepPlan, costs: Costs) -> Estimate:
    """The device call's phases and seconds for ``plan`` at ``costs``."""
    load = plan.load
    tiny = any("@tiny" in spec for spec in plan.servers.list)
    greedy = [label for label in plan.labels if label not in set(plan.profile.only)]
    turn_s = load.warmup_s + load.windows * load.window_s + costs.turn_overhead_s
    if load.fixed_requests:
        turn_s = max(
            (fixed_turn_s(plan, costs, max(load.concurrency), spec) for spec in swept(plan)),
            default=0.0,
        )
    phases = [
        Phase("bundle and synthetic models", costs.build_s + (costs.tiny_build_s if tiny else 0)),
        Phase("CPU probe", costs.probe_s if plan.host.monitor and plan.host.probe_s > 0 else 0),
        Phase(f"{len(plan.servers.list)} servers started together, ready", costs.ready_s),
        Phase(f"greedy check of {len(greedy)} servers", len(greedy) * costs.greedy_s),
    ]
    if load.fixed_requests:
        phases += fixed_phases(plan, costs)
    else:
        phases += [Phase(f"{what}, {turn_s:.2f} s each", n * turn_s) for what, n in turns(plan)]
    window = 16 if plan.profile.host_side else 8
    per_profile = 1 + window + PROFILE_WAIT_S
    phases += [
        Phase(f"{len(plan.profile.servers)} profiles", len(plan.profile.servers) * per_profile),
        Phase("attention kernel check", costs.kernels_s if plan.profile.kernels else 0),
        Phase("pack", costs.pack_s),
    ]
    reps = plan.schedule.reps if plan.schedule.reps > 0 else plan.schedule.rounds
    measured = reps * load.windows * load.window_s
    if load.fixed_requests:  # the least work a turn: the lowest level's requests
        least = min(load.concurrency)
        fastest = min(
            (request_s(plan, costs, least, load.max_new, spec) for spec in swept(plan)),
            default=0.0,
        )
        measured = reps * requests_at(load.fixed_requests, load.fixed_tokens, least, load.max_new)
        measured *= fastest
    return Estimate(tuple(p for p in phases if p.seconds > 0), turn_s, measured)


def fits(plan: SweepPlan) -> bool:
    """Whether the plan ends within its deadline at the slowest start-up recorded."""
    return estimate(plan, SLOWEST).total_s <= plan.limits.deadline_s


def render_estimate(plan: SweepPlan) -> str:
    """The estimate as a table: each phase, typical and at the slowest recorded costs."""
    typical, slowest = estimate(plan, TYPICAL), estimate(plan, SLOWEST)
    width = max(len(p.name) for p in slowest.phases) + 2
    lines = [f"{'phase':<{width}}{'typical':>9}{'slowest':>9}"]
    fast = {p.name.split(",")[0]: p.seconds for p in typical.phases}
    for p in slowest.phases:
        lines.append(f"{p.name:<{width}}{fast.get(p.name.split(',')[0], 0):>9.0f}{p.seconds:>9.0f}")
    lines.append(f"{'total':<{width}}{typical.total_s:>9.0f}{slowest.total_s:>9.0f}")
    verdict = "fits" if fits(plan) else "does NOT fit"
    turns = plan.schedule.reps if plan.schedule.reps > 0 else plan.schedule.rounds
    errors = ", ".join(f"{sd / turns**0.5:.1f}% at {sd:g}%" for sd in TURN_SD_PCT)
    lines += [
        f"limits.deadline_s = {plan.limits.deadline_s}: the plan {verdict} at the slowest "
        "start-up recorded",
        f"measured per server and level: {slowest.measured_s:.1f} s of windows "
        "(turns x windows x window_s)"
        if not plan.load.fixed_requests
        else f"measured per server at the lowest level: {slowest.measured_s:.1f} s of fixed work "
        "(turns x fixed_requests x a request's time),",
        f"a paired comparison's s.e. over {turns} turns, by the spread of one turn's "
        f"difference: {errors}",
    ]
    return "\n".join(lines) + "\n"
