"""The claims of a live sweep, each judged SHOWN, REFUTED or UNDECIDED beside its standard error,
and the noise floor its A/A pairs show.

The claim of issue 21, at each level a hook server ran: *the hook makes at least 0.97x the
tokens/s of the better of no speculation and EAGLE-3* (the better: the one of the two that
measured more in the same call at that level). It is judged on the paired comparison of the
hook with that server over the turns both ran (``sweep_stats.paired_turns``):

* UNDECIDED where it rests on fewer than ``min_turns`` turns, where its standard error is above
  ``max_se_pct`` (1%), or where the level's noise floor is unknown (no A/A pair measured there)
  or above 1%: an A/A pair (two identical servers, ``LABEL`` and ``LABEL+R``) that differ by more
  than 1% and by more than two of their standard errors;
* else SHOWN where the hook's difference is at least ``100 * (ratio - 1)`` (-3%), REFUTED where
  it is below.

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

HOOKS = ("hook", "hookcold")  # the hook deciding (off: draft KV kept current, or not)


class Verdict(enum.Enum):
    SHOWN = "SHOWN"
    REFUTED = "REFUTED"
    UNDECIDED = "UNDECIDED"


@dataclass(frozen=True)
class ClaimRule:
    ratio: float = 0.97  # the hook at least this times the better server
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
class Claim:
    call: str  # a call, or the calls pooled, joined by "+"
    hook: str  # the hook server's label
    concurrency: int
    better: str  # the server it is held against
    paired: Paired | None  # hook against the better
    adaptive: Paired | None  # upstream adaptive (same draft) against the better, beside it
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


def claims(rows: Sequence[dict], floors: Sequence[Floor], rule: ClaimRule) -> list[Claim]:
    """The claim at each level of each hook server (not replicas), from the same call's rows."""
    by, _ = table(rows)
    out = []
    for (call, kind, draft, conc), hook in sorted(by.items()):
        if kind not in HOOKS:
            continue
        refs = [by.get((call, "base", "", conc)), by.get((call, "eagle3", draft, conc))]
        present = [r for r in refs if r is not None]
        if not present:
            continue
        better = max(present, key=lambda r: r["tok_per_s"])
        adaptive = by.get((call, "adaptive", draft, conc))
        p = paired_turns(hook, better)
        level = tuple(f for f in floors if (f.call, f.concurrency) == (call, conc))
        verdict, reason = judge(p, level, rule)
        out.append(
            Claim(
                call,
                hook["label"],
                conc,
                better["label"],
                p,
                paired_turns(adaptive, better) if adaptive else None,
                level,
                verdict,
                reason,
            )
        )
    return out


def pooled_claims(found: Sequence[Claim], shapes: dict[str, float], rule: ClaimRule) -> list[Claim]:
    """The claims of one hook at one level pooled over the calls that ran the same load shape
    (``shapes``: call -> its requests' length spread), two calls or more; their A/A pairs
    pooled alike (:func:`sweep_stats.pool`)."""
    groups: dict[tuple[str, int, float], list[Claim]] = {}
    for c in found:
        groups.setdefault((c.hook, c.concurrency, shapes.get(c.call, 0.0)), []).append(c)
    out = []
    for (hook, conc, _), group in sorted(groups.items()):
        if len(group) < 2:
            continue
        calls = "+".join(c.call for c in group)
        pairs: dict[tuple[str, str], list[Paired]] = {}
        for f in (f for c in group for f in c.floors):
            pairs.setdefault((f.server, f.against), []).append(f.paired)
        floors = []
        for (server, against), parts in sorted(pairs.items()):
            both = pool(parts)
            if both is not None:
                floors.append(Floor(calls, server, against, conc, both))
        p = pool([c.paired for c in group if c.paired is not None])
        adaptive = pool([c.adaptive for c in group if c.adaptive is not None])
        verdict, reason = judge(p, floors, rule)
        better = "/".join(sorted({c.better for c in group}))
        out.append(Claim(calls, hook, conc, better, p, adaptive, tuple(floors), verdict, reason))
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


def render_claims(found: Sequence[Claim], rule: ClaimRule, title: str) -> list[str]:
    """Markdown: one row per claim, its paired difference and standard error beside it."""
    if not found:
        return []
    lines = [
        "",
        f"{title}: the hook >= {rule.ratio:g}x the better of no speculation and EAGLE-3, "
        f"paired over turns (± 1 s.e.); it counts where the s.e. is at most "
        f"{rule.max_se_pct:g}% from {rule.min_turns} turns or more and the level's A/A floor "
        f"is within {rule.max_se_pct:g}%.",
        "",
        "| call | hook | c | the better | hook vs the better | adaptive vs the better "
        "| A/A floor | verdict |",
        "| --- | --- | ---: | --- | ---: | ---: | --- | --- |",
    ]
    for c in found:
        floor = "; ".join(describe_floor(f) for f in c.floors)
        verdict = c.verdict.value + (f" ({c.reason})" if c.reason else "")
        lines.append(
            f"| {c.call} | {c.hook} | {c.concurrency} | {c.better} | {describe(c.paired)} | "
            f"{describe(c.adaptive)} | {floor} | {verdict} |"
        )
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
    found: Sequence[Claim], pooled: Sequence[Claim], floors: Sequence[Floor], rule: ClaimRule
) -> str:
    """The noise floor, the claims of each call and those pooled over calls, as markdown."""
    lines = render_floors(floors)
    lines += render_claims(found, rule, "Claims")
    lines += render_claims(pooled, rule, "Claims pooled over calls of one load shape")
    return "\n".join(lines) + "\n" if lines else ""
