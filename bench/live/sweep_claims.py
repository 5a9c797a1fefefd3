"""The claims of a live sweep, each judged SHOWN, REFUTED or UNDECIDED beside its standard error,
and the noise floor its A/A pairs show.

A claim (:class:`ClaimDef`) holds at each level a server of its kinds ran: *the server makes at
least RATIO times the tokens/s of the better of its reference servers* (the better: the one
that measured more in the same call at that level). ``CLAIMS`` are the report's: issue 21's
*the hook >= 0.97x the better of no speculation and EAGLE-3* (``HOOK_CLAIM``) and issue 20's
cost of off, *the hook held off >= 0.99x no speculation* (``OFF_COST_CLAIM``, the plain and
the zero-step off state). A claim is judged on the paired comparison of the server with the
better over the turns both ran (``sweep_stats.paired_turns``):

* UNDECIDED where it rests on fewer than ``min_turns`` turns, where its standard error is above
  ``max_se_pct`` (1%), or where the level's noise floor is unknown (no A/A pair measured there)
  or above 1%: an A/A pair (two identical servers, ``LABEL`` and ``LABEL+R``) that differ by more
  than 1% and by more than two of their standard errors;
* else SHOWN where the server's difference is at least ``100 * (ratio - 1)`` (-3% for the hook,
  -1% held off), REFUTED where it is below.

    >>> rule = ClaimRule()
    >>> judge(Paired(-2.5, 0.8, 5), [], rule)
    (<Verdict.UNDECIDED: 'UNDECIDED'>, 'no A/A pair at this level: the floor is unknown')
    >>> floor = Floor("call", "base+aa", "base", 8, Paired(0.4, 0.5, 5))
    >>> judge(Paired(-2.5, 0.8, 5), [floor], rule)[0], judge(Paired(-3.5, 0.8, 5), [floor], rule)[0]
    (<Verdict.SHOWN: 'SHOWN'>, <Verdict.REFUTED: 'REFUTED'>)
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sweep_stats import Paired, paired_turns, pool, table

# The hook deciding (cal: with the calibrated policy's defaults) and the hook held off. hookcold
# and hookoff are the kinds of recorded calls (bench/results/live) of the hook before, whose off
# was upstream's zero-step state (without the draft extend, and as it was); plans can no longer
# run them, the report still reads them.
HOOKS = ("hook", "cal", "hookcold")
HELD_OFF = ("plainoff", "hookoff")


class Verdict(enum.Enum):
    SHOWN = "SHOWN"
    REFUTED = "REFUTED"
    UNDECIDED = "UNDECIDED"


@dataclass(frozen=True)
class ClaimRule:
    ratio: float = 0.97  # the server at least this times the better reference
    max_se_pct: float = 1.0  # a claim counts only where its standard error is at most this
    min_turns: int = 4  # a standard error of fewer turns is itself too uncertain

    @property
    def threshold_pct(self) -> float:
        """The least difference that holds the claim, in % (0.97: -3.0, not -3.0000000000000027)."""
        return round(100 * (self.ratio - 1), 9)


@dataclass(frozen=True)
class Floor:
    """An A/A pair at one level: a replica against its configuration's first server."""

    call: str
    server: str
    against: str
    concurrency: int
    paired: Paired

    def exceeds(self, rule: ClaimRule) -> bool:
        """Whether two identical servers differ beyond the precision a claim needs."""
        pct, se = abs(self.paired.pct), self.paired.se_pct
        return se is not None and pct > rule.max_se_pct and pct > 2 * se


@dataclass(frozen=True)
class ClaimDef:
    """A claim: each server of ``kinds`` (replicas aside) makes at least ``rule.ratio`` times
    the tokens/s of the better of its call's ``against`` servers at the same level, those of
    its draft (``base`` has none); ``beside``: a kind shown against the same server, not
    judged. ``statement`` says it in words, ``{ratio}`` the rule's; ``title`` heads its table.
    """

    title: str
    statement: str
    kinds: tuple[str, ...]
    against: tuple[str, ...]
    beside: str = ""
    rule: ClaimRule = ClaimRule()


HOOK_CLAIM = ClaimDef(
    "Claims",
    "the hook >= {ratio:g}x the better of no speculation and EAGLE-3",
    HOOKS,
    ("base", "eagle3"),
    beside="adaptive",
)
OFF_COST_CLAIM = ClaimDef(
    "Cost of off",
    "the hook held off >= {ratio:g}x no speculation",
    HELD_OFF,
    ("base",),
    rule=ClaimRule(ratio=0.99),
)
CLAIMS = (HOOK_CLAIM, OFF_COST_CLAIM)


@dataclass(frozen=True)
class Claim:
    call: str  # a call, or the calls pooled, joined by "+"
    server: str  # the label of the server the claim is about
    concurrency: int
    against: str  # the server it is held against (the better reference)
    paired: Paired | None  # the server against that one
    beside: Paired | None  # the claim's beside kind (same draft) against that one
    floors: tuple[Floor, ...]
    verdict: Verdict
    reason: str


def judge(p: Paired | None, floors: Sequence[Floor], rule: ClaimRule) -> tuple[Verdict, str]:
    """The verdict of a claim measured as ``p`` at a level with these A/A ``floors``."""
    if p is None or p.se_pct is None or p.turns < rule.min_turns:
        turns = 0 if p is None else p.turns
        return Verdict.UNDECIDED, f"{_turns(turns)} paired, fewer than {rule.min_turns}"
    if p.se_pct > rule.max_se_pct:
        return Verdict.UNDECIDED, f"s.e. {p.se_pct:.2f}% > {rule.max_se_pct:.1f}%"
    known = [f for f in floors if f.paired.se_pct is not None]
    if not known:
        return Verdict.UNDECIDED, "no A/A pair at this level: the floor is unknown"
    loud = [f for f in known if f.exceeds(rule)]
    if loud:
        f = loud[0]
        return Verdict.UNDECIDED, f"A/A floor above {rule.max_se_pct:.1f}%: {describe_floor(f)}"
    if p.pct >= rule.threshold_pct:
        return Verdict.SHOWN, ""
    return Verdict.REFUTED, ""


def aa_floors(rows: Iterable[dict]) -> list[Floor]:
    """Every replica row (``LABEL+R``, ``base-X``; before ``--pool-replicas``) against its
    configuration's first server at the same level of the same call."""
    by = {(r["call"], r["label"], r["concurrency"]): r for r in rows}
    out = []
    for (call, label, conc), row in sorted(by.items()):
        other = by.get((call, row.get("primary"), conc)) if row.get("replica") else None
        if other is None:
            continue
        p = paired_turns(row, other)
        if p is not None:
            out.append(Floor(call, label, other["label"], conc, p))
    return out


def claims(rows: Sequence[dict], floors: Sequence[Floor], claim: ClaimDef) -> list[Claim]:
    """``claim`` at each level of each of its servers (not replicas), from the same call's
    rows."""
    by, _ = table(rows)
    out = []
    for (call, kind, draft, conc), mine in sorted(by.items()):
        if kind not in claim.kinds:
            continue
        refs = [by.get((call, k, "" if k == "base" else draft, conc)) for k in claim.against]
        present = [r for r in refs if r is not None]
        if not present:
            continue
        better = max(present, key=lambda r: r["tok_per_s"])
        beside = by.get((call, claim.beside, draft, conc)) if claim.beside else None
        p = paired_turns(mine, better)
        level = tuple(f for f in floors if (f.call, f.concurrency) == (call, conc))
        verdict, reason = judge(p, level, claim.rule)
        out.append(
            Claim(
                call,
                mine["label"],
                conc,
                better["label"],
                p,
                paired_turns(beside, better) if beside else None,
                level,
                verdict,
                reason,
            )
        )
    return out


def pooled_claims(found: Sequence[Claim], shapes: dict[str, float], rule: ClaimRule) -> list[Claim]:
    """The claims of one server at one level pooled over the calls that ran the same load shape
    (``shapes``: call -> its requests' length spread), two calls or more; their A/A pairs
    pooled alike (:func:`sweep_stats.pool`)."""
    groups: dict[tuple[str, int, float], list[Claim]] = {}
    for c in found:
        groups.setdefault((c.server, c.concurrency, shapes.get(c.call, 0.0)), []).append(c)
    out = []
    for (label, conc, _), group in sorted(groups.items()):
        if len(group) < 2:
            continue
        calls = "+".join(c.call for c in group)
        pairs: dict[tuple[str, str], list[Paired]] = {}
        for f in (f for c in group for f in c.floors):
            pairs.setdefault((f.server, f.against), []).append(f.paired)
        floors = []
        for (replica, primary), parts in sorted(pairs.items()):
            both = pool(parts)
            if both is not None:
                floors.append(Floor(calls, replica, primary, conc, both))
        p = pool([c.paired for c in group if c.paired is not None])
        beside = pool([c.beside for c in group if c.beside is not None])
        verdict, reason = judge(p, floors, rule)
        against = "/".join(sorted({c.against for c in group}))
        out.append(Claim(calls, label, conc, against, p, beside, tuple(floors), verdict, reason))
    return out


def describe(p: Paired | None) -> str:
    """``-1.2 ± 0.6% (5 turns)``; empty when not measured."""
    if p is None:
        return ""
    se = "" if p.se_pct is None else f" ± {p.se_pct:.1f}%"
    return f"{p.pct:+.1f}%{se} ({_turns(p.turns)})"


def _turns(n: int) -> str:
    return f"{n} turn" if n == 1 else f"{n} turns"


def describe_floor(f: Floor) -> str:
    return f"{f.server} vs {f.against} {describe(f.paired)}"


def ratio(p: Paired | None) -> str:
    """The paired difference as a ratio, ``0.988x``; empty when not measured."""
    return "" if p is None else f"{1 + p.pct / 100:.3f}x"


def render_claims(found: Sequence[Claim], claim: ClaimDef, title: str) -> list[str]:
    """Markdown: one row per claim, its ratio, its paired difference and standard error, the
    level's A/A floor and its verdict."""
    if not found:
        return []
    rule = claim.rule
    beside = [f"{claim.beside} vs against"] if claim.beside else []
    heads = ["call", "server", "c", "against", "ratio", "server vs against", *beside]
    lines = [
        "",
        f"{title}: {claim.statement.format(ratio=rule.ratio)}, paired over turns (± 1 s.e.); "
        f"it counts where the s.e. is at most {rule.max_se_pct:g}% from {rule.min_turns} "
        f"turns or more and the level's A/A floor is within {rule.max_se_pct:g}%.",
        "",
        "| " + " | ".join([*heads, "A/A floor", "verdict"]) + " |",
        "| --- | --- | ---: | --- | ---: | ---: |" + " ---: |" * len(beside) + " --- | --- |",
    ]
    for c in found:
        floor = "; ".join(describe_floor(f) for f in c.floors)
        verdict = c.verdict.value + (f" ({c.reason})" if c.reason else "")
        cells = [c.call, c.server, str(c.concurrency), c.against, ratio(c.paired)]
        cells += [describe(c.paired)] + ([describe(c.beside)] if beside else [])
        lines.append("| " + " | ".join([*cells, floor, verdict]) + " |")
    counts = {v: sum(c.verdict is v for c in found) for v in Verdict}
    lines += ["", ", ".join(f"{v.value} {n}" for v, n in counts.items()) + f" of {len(found)}"]
    return lines


def render_floors(floors: Sequence[Floor]) -> list[str]:
    """Markdown: each A/A pair's difference and s.e. by level, the noise floor of the run."""
    if not floors:
        return []
    concs = sorted({f.concurrency for f in floors})
    lines = [
        "",
        "Noise floor: two identical servers (A/A pairs), paired over turns (± 1 s.e.):",
        "",
        "| call | server | against | " + " | ".join(f"c={c}" for c in concs) + " |",
        "| --- | --- | --- |" + " ---: |" * len(concs),
    ]
    for call, server, against in sorted({(f.call, f.server, f.against) for f in floors}):
        mine = {
            f.concurrency: f
            for f in floors
            if (f.call, f.server, f.against) == (call, server, against)
        }
        cells = [describe(mine[c].paired) if c in mine else "" for c in concs]
        lines.append(f"| {call} | {server} | {against} | " + " | ".join(cells) + " |")
    return lines


def verdicts_markdown(
    rows: Sequence[dict],
    floors: Sequence[Floor],
    shapes: dict[str, float],
    definitions: Sequence[ClaimDef] = CLAIMS,
) -> str:
    """The noise floor, then each claim at each level of each call and pooled over the calls
    of one load shape (``shapes``: see :func:`pooled_claims`), as markdown."""
    lines = render_floors(floors)
    for claim in definitions:
        found = claims(rows, floors, claim)
        pooled = pooled_claims(found, shapes, claim.rule)
        lines += render_claims(found, claim, claim.title)
        lines += render_claims(pooled, claim, f"{claim.title} pooled over calls of one load shape")
    return "\n".join(lines) + "\n" if lines else ""
