"""The checks of a sweep plan: what its types cannot say, each refusal one line naming the key.

Used by ``sweep_plan.py`` (``load_plan``) before sweep.sh starts anything. Stdlib only.
"""

from __future__ import annotations

import math

from plan_estimate import SLOWEST, estimate, fits, swept
from plan_schema import (
    PIN_MODES,
    SERVER,
    SERVER_KINDS,
    PlanError,
    SweepPlan,
    did_you_mean,
    server_label,
)

DEVICE_CALL_S = 600  # a device call is ended after this many seconds


def check(plan: SweepPlan, *, fit: bool = True) -> None:
    """What the types cannot say: servers it can start, an A/A pair, labels that exist, sane
    numbers, and (``fit``) a run that ends within its deadline."""
    check_servers(plan)
    check_profile(plan)
    check_aa_pair(plan)
    check_numbers(plan)
    if fit:
        check_fits(plan)


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
            hint = did_you_mean(m["kind"], SERVER_KINDS)
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
        ("schedule.warmup_turns", plan.schedule.warmup_turns, 0),
        ("load.windows", plan.load.windows, 1),
        ("load.window_s", plan.load.window_s, 0.01),
        ("load.max_new", plan.load.max_new, 1),
        ("load.fixed_requests", plan.load.fixed_requests, 0),
        ("load.fixed_tokens", plan.load.fixed_tokens, 0),
        ("host.gc_warning_s", plan.host.gc_warning_s, 0),
    ):
        if number < least:
            raise PlanError(f"{key}: {number} is below {least}")
    if plan.load.fixed_tokens and not plan.load.fixed_requests:
        raise PlanError(
            "load.fixed_tokens: it lengthens fixed-work turns; set load.fixed_requests above 0 "
            "(fixed work) or fixed_tokens to 0"
        )
    if plan.schedule.warmup_turns and not plan.schedule.reps:
        raise PlanError(
            "schedule.warmup_turns: warm-up turns come before the turns of schedule.reps; "
            "set schedule.reps above 0 or warmup_turns to 0"
        )
    for draft, q in plan.models.accept.items():
        if not 0.0 <= q <= 1.0:
            raise PlanError(f"models.accept.{draft}: {q} is a fraction of the vocabulary, 0 to 1")


def configuration(spec: str) -> str:
    """What a server runs, its replica mark dropped: ``base+aa`` and ``base:b`` run ``base``.

    >>> [configuration(s) for s in ("base+aa", "base:b", "eagle3:mid+2", "hook@tiny")]
    ['base', 'base', 'eagle3:mid', 'hook@tiny']
    """
    m = SERVER.match(spec)
    assert m is not None
    if m["kind"] == "base" and not m["tiny"]:
        return "base"
    return m["kind"] + (f":{m['draft']}" if m["draft"] else "") + (m["tiny"] or "")


def check_aa_pair(plan: SweepPlan) -> None:
    """Two identical measured servers (an A/A pair), or a reason in servers.aa_pair_waived.

    Two servers doing the same work differ by the noise between server processes and turns:
    the floor under every comparison of the run, which the report shows level by level.
    """
    measured = [configuration(spec) for spec in swept(plan)]
    if not measured or plan.servers.aa_pair_waived.strip():
        return
    if len(set(measured)) == len(measured):
        raise PlanError(
            "servers.list: no A/A pair (two identical servers, e.g. 'base' and 'base+aa') to "
            "show the noise floor; add one, or say why not in servers.aa_pair_waived"
        )


def check_fits(plan: SweepPlan) -> None:
    """The run ends within limits.deadline_s at the slowest start-up recorded."""
    if plan.limits.deadline_s > DEVICE_CALL_S - 10:
        raise PlanError(
            f"limits.deadline_s: {plan.limits.deadline_s} leaves no time to pack in a device "
            f"call of {DEVICE_CALL_S} s; at most {DEVICE_CALL_S - 10}"
        )
    if not fits(plan):
        need = estimate(plan, SLOWEST).total_s
        raise PlanError(
            f"limits.deadline_s: the plan needs {math.ceil(need)} s at the slowest start-up "
            f"recorded, more than its {plan.limits.deadline_s} s (sweep_plan.py PLAN --estimate); "
            "fewer levels, servers or turns, or shorter windows"
        )
