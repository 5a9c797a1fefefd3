"""The statistics of the live sweep's report: a level's windows pooled, the paired comparison of
two servers over the turns they took, and comparisons pooled over calls.

Servers take turns at each level (``sweep_load.py --targets --reps``): a turn of every server,
the order rotated, then the next. Two servers compared in the same turn ran seconds apart, so a
drift of the machine falls on both alike; the unit of a paired comparison is the turn, not the
window, because the windows of one turn vary together (calls 23-25: two identical servers'
per-turn differences spread as much as their per-window ones). A turn is keyed ``(tag, rep)``
(``tag`` tells rounds apart where rounds were run instead).

    >>> a = {"turns": {("t", 1): 99.0, ("t", 2): 98.0}}
    >>> b = {"turns": {("t", 1): 100.0, ("t", 2): 100.0}}
    >>> paired(a, b)  # -1% and -2% in the two turns: -1.5 +- 0.5%
    (-1.5, 0.5)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Paired:
    """``mine / other - 1`` in %, averaged over the turns both servers ran, and its standard
    error (the turns' sample standard deviation over the square root of their number)."""

    pct: float
    se_pct: float | None  # None with fewer than two turns
    turns: int


def merged(levels: Sequence[dict]) -> dict:
    """One row from the repeats of a (server, concurrency): all windows pooled.

    ``se_pct``: the standard error of the mean over the windows, in % of the mean (None with
    one window). ``turns``: each turn's mean rate by ``(tag, rep)``, the windows of all the
    rows given that ran in that turn averaged; rows merged before (the servers of one
    configuration, pooled) count with each turn's mean.
    """
    rates = [r for row in levels for r in row["window_tok_per_s"]]
    mean = sum(rates) / len(rates)
    turns: dict[tuple[str, int], list[float]] = {}
    for row in levels:
        if "turns" in row:  # a merged row (a replica, pooled): its turns as they are
            for key, rate in row["turns"].items():
                turns.setdefault(key, []).append(rate)
        else:
            key = (row.get("tag", ""), row.get("rep", 1))
            turns.setdefault(key, []).extend(row["window_tok_per_s"])
    var = sum((r - mean) ** 2 for r in rates) / (len(rates) - 1) if len(rates) > 1 else None
    tpv = [row["tokens_per_verify"] for row in levels if row.get("tokens_per_verify")]
    return {
        **levels[0],
        "tok_per_s": round(mean, 1),
        "window_tok_per_s": rates,
        "spread_pct": round(100 * (max(rates) - min(rates)) / mean, 2) if mean else None,
        "se_pct": round(100 * (var / len(rates)) ** 0.5 / mean, 2) if var and mean else None,
        "requests": sum(row["requests"] for row in levels),
        "errors": sum(row["errors"] for row in levels),
        "tokens_per_verify": round(sum(tpv) / len(tpv), 3) if tpv else None,
        "repeats": sum(row.get("repeats", 1) for row in levels),
        "turns": {key: sum(rs) / len(rs) for key, rs in turns.items()},
    }


def paired_turns(mine: dict, other: dict) -> Paired | None:
    """The paired comparison of two merged rows over their common turns (None: no turn in
    common)."""
    a, b = mine.get("turns") or {}, other.get("turns") or {}
    ratios = [100 * (a[k] / b[k] - 1) for k in sorted(set(a) & set(b)) if b[k]]
    if not ratios:
        return None
    mean = sum(ratios) / len(ratios)
    if len(ratios) < 2:
        return Paired(mean, None, 1)
    var = sum((x - mean) ** 2 for x in ratios) / (len(ratios) - 1)
    return Paired(mean, (var / len(ratios)) ** 0.5, len(ratios))


def paired(mine: dict, other: dict) -> tuple[float | None, float | None]:
    """:func:`paired_turns` rounded to 0.1%, or (None, None) with fewer than two turns."""
    p = paired_turns(mine, other)
    if p is None or p.se_pct is None:
        return None, None
    return round(p.pct, 1), round(p.se_pct, 1)


def pool(parts: Sequence[Paired]) -> Paired | None:
    """Independent measurements of one difference (calls) as one: the inverse-variance
    weighted mean and its standard error; parts without a standard error are left out.

    >>> pool([Paired(-4.0, 2.0, 3), Paired(2.0, 1.0, 4)])
    Paired(pct=0.8, se_pct=0.8944271909999159, turns=7)
    """
    usable = [p for p in parts if p.se_pct]
    if not usable:
        return None
    weights = [1 / p.se_pct**2 for p in usable if p.se_pct]
    mean = sum(w * p.pct for w, p in zip(weights, usable, strict=True)) / sum(weights)
    return Paired(mean, sum(weights) ** -0.5, sum(p.turns for p in usable))


def across_calls(comp: Sequence[dict]) -> list[dict]:
    """The paired comparisons of one hook configuration (kind, draft) at a concurrency pooled
    over the calls that measured it (:func:`pool`); only where two calls or more contribute."""
    groups: dict[tuple[str, str, int], list[dict]] = {}
    for c in comp:
        if c["paired_pct"] is not None and c["paired_se_pct"]:
            key = (c["hook_kind"], c["draft"], c["concurrency"])
            groups.setdefault(key, []).append(c)
    out = []
    for (kind, draft, conc), group in sorted(groups.items()):
        both = pool([Paired(c["paired_pct"], c["paired_se_pct"], 0) for c in group])
        if len(group) < 2 or both is None or both.se_pct is None:
            continue
        out.append(
            {
                "hook_kind": kind,
                "draft": draft,
                "concurrency": conc,
                "calls": [c["call"] for c in group],
                "paired_pct": round(both.pct, 1),
                "paired_se_pct": round(both.se_pct, 1),
            }
        )
    return out


def quadrature(*errors: float | None) -> float | None:
    """The combined error of independent ones (in %): None when any is unknown."""
    if any(x is None for x in errors):
        return None
    return sum(x * x for x in errors if x is not None) ** 0.5


def table(rows: Sequence[dict]) -> tuple[dict, dict]:
    """{(call, kind, draft, conc): row}, and the base rate per (call, conc); replicas left out."""
    compared = [r for r in rows if not r.get("replica")]
    by = {(r["call"], r["kind"], r["draft"], r["concurrency"]): r for r in compared}
    base = {(r["call"], r["concurrency"]): r["tok_per_s"] for r in compared if r["kind"] == "base"}
    return by, base
