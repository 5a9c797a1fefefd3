#!/usr/bin/env python3
"""Tables, CSV and plot from sweep.sh runs: tokens/s by concurrency, per server and draft.

    sweep_report.py RUN_DIR... --csv bench/results/live_sweep.csv \
        --md bench/results/live/sweep.md --plot bench/results/img/live-sweep-0.5.16.svg

Each RUN_DIR holds one device call's ``sweep.jsonl`` (and ``greedy.jsonl``), plain or gzipped
(``stored_results.py``); the call is named after the directory. A server label is ``KIND`` or ``KIND-DRAFT`` (``eagle3-high``). Where one
call lacks a server that another call measured under the same load (``max_new_spread``), the
comparison rescales by the ratio of the two calls' ``base`` servers at that concurrency (the
same model, so the same load), and says so. ``base-X`` is a second no-speculation server of
the same call (``base:X`` in ``SERVERS``) and ``LABEL+R`` a second server of any configuration
(``KIND[:DRAFT]+R``): shown and plotted in gray, as a measure of the noise between servers,
never compared with, unless ``--pool-replicas`` pools each configuration's servers (their
windows) into one row before the comparison. Greedy outputs are compared with the same call's
``base`` on the same models (``base-tiny`` for ``KIND@tiny`` servers). Where several calls
measured one hook configuration, their paired comparisons are also pooled (inverse-variance
weighted, :func:`across_calls`): only calls that ran the same hook code belong together.

Paired comparisons are over the turns two servers took at a level (``sweep_stats.py``). After
the tables come the run's noise floor, each A/A pair's difference and standard error by level,
the claim of issue 21 at each level a hook ran and issue 20's cost of off at each level a hook
held off ran (``plainoff``; ``hookoff`` in recorded calls: >= 0.99x no speculation), each judged
SHOWN, REFUTED or UNDECIDED with its ratio and standard error beside it (``sweep_claims.py``;
``--ratio``, ``--off-ratio``, ``--max-se``, ``--min-turns``). Warm-up turns (``"warmup": true``,
``schedule.warmup_turns``) are left out of all of it and shown last, on their own.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from stored_results import is_stored, read_lines
from sweep_claims import (
    HOOK_CLAIM,
    HOOKS,
    OFF_COST_CLAIM,
    ClaimRule,
    aa_floors,
    verdicts_markdown,
)
from sweep_failed import failed_markdown, failed_turn
from sweep_plot import plot
from sweep_stats import across_calls, merged, paired, quadrature, table


def load(run_dirs: Sequence[Path], warmup: bool = False) -> tuple[list[dict], list[dict]]:
    """The rows of ``run_dirs`` merged by (server, level), and their greedy checks; the scored
    turns, or with ``warmup`` the warm-up turns only (``sweep_load.py --warmup-turns``)."""
    scored, warm, greedy, _ = load_turns(run_dirs)
    return (warm if warmup else scored), greedy


def load_turns(run_dirs: Sequence[Path]) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    """Each file read once: the scored rows, the warm-up rows (as :func:`load` merges them),
    the greedy checks and the failed turns.

    A turn in which no request completed (a server that died or never listened: every request
    an error) measured nothing: it is left out of its level, and listed among the failed ones
    (a level left with no turn is no row at all, so never a 0 tok/s server)."""
    scored, warm, greedy, failed = [], [], [], []
    for run in run_dirs:
        levels: dict[tuple[bool, str, int], list[dict]] = {}
        for line in read_lines(run / "sweep.jsonl"):
            row = json.loads(line)
            if "concurrency" not in row:
                continue
            if failed_turn(row):
                failed.append({**row, "call": run.name})
                continue
            key = (bool(row.get("warmup")), row["label"], row["concurrency"])
            levels.setdefault(key, []).append(row)
        for (is_warm, label, _), repeats in sorted(levels.items()):
            head, _, again = label.partition("+")  # LABEL+R: a second server of LABEL
            kind, _, draft = head.partition("-")
            row = {**merged(repeats), "call": run.name, "kind": kind, "draft": draft}
            if kind == "base" and draft:  # base-X: no draft, a second server
                row.update(draft="", replica=draft, primary="base")
            elif again:
                row.update(replica=again, primary=head)
            (warm if is_warm else scored).append(row)
        path = run / "greedy.jsonl"
        for line in read_lines(path) if is_stored(path) else ():
            greedy.append({**json.loads(line), "call": run.name})
    return scored, warm, greedy, failed


def pooled(rows: Sequence[dict]) -> list[dict]:
    """Each configuration's servers of one call (primary and replicas) as one row a level."""
    groups: dict[tuple[str, str, int], list[dict]] = {}
    for r in rows:
        label = r.get("primary", r["label"])
        groups.setdefault((r["call"], label, r["concurrency"]), []).append(r)
    out = []
    for (_, label, _), group in sorted(groups.items()):
        main = next((r for r in group if not r.get("replica")), group[0])
        row = {**main, **merged(group), "label": label, "servers": len(group)}
        row.pop("replica", None)
        row.pop("primary", None)
        out.append(row)
    return out


def loads(rows: Sequence[dict]) -> dict[str, float]:
    """{call: the load it applied}: its requests' max_new_tokens spread (0 when not recorded)."""
    return {r["call"]: r.get("max_new_spread", 0.0) for r in rows}


def rate(
    by: dict, base: dict, load: dict[str, float], kind: str, draft: str, conc: int, call: str
) -> tuple[float | None, str, float | None]:
    """tok/s of KIND-DRAFT at CONC, rescaled into CALL's base if measured in another call
    under the same load; its note; its standard error in % (None when unknown)."""
    for key_call in [call] + sorted(set(load) - {call}):
        row = by.get((key_call, kind, "" if kind == "base" else draft, conc))
        if row is None or load[key_call] != load[call]:
            continue
        if key_call == call:
            return row["tok_per_s"], "", row.get("se_pct")
        own, other = base.get((call, conc)), base.get((key_call, conc))
        if own and other:
            ses = [
                row.get("se_pct"),
                by[(call, "base", "", conc)].get("se_pct"),
                by[(key_call, "base", "", conc)].get("se_pct"),
            ]
            return row["tok_per_s"] * own / other, f"rescaled from {key_call}", quadrature(*ses)
    return None, "", None


def comparison(rows: Sequence[dict]) -> list[dict]:
    by, base = table(rows)
    load = loads(rows)
    out = []
    hooks = sorted({(r["call"], r["kind"], r["draft"]) for r in rows if r["kind"] in HOOKS})
    for call, kind, draft in hooks:
        for conc in sorted({r["concurrency"] for r in rows}):
            hook, _, se_hook = rate(by, base, load, kind, draft, conc, call)
            plain, _, se_plain = rate(by, base, load, "base", draft, conc, call)
            spec, how, se_spec = rate(by, base, load, "eagle3", draft, conc, call)
            adaptive, how_a, _ = rate(by, base, load, "adaptive", draft, conc, call)
            if hook is None or plain is None or (call, kind, draft, conc) not in by:
                continue  # the hook only where its own call measured it, never rescaled
            best, se_best, best_kind = max(
                (
                    (x, se, k)
                    for x, se, k in ((plain, se_plain, "base"), (spec, se_spec, "eagle3"))
                    if x is not None
                ),
                key=lambda triple: triple[0],
            )
            noise = quadrature(se_hook, se_best)
            best_row = by.get((call, best_kind, "" if best_kind == "base" else draft, conc))
            pair = paired(by[(call, kind, draft, conc)], best_row) if best_row else (None, None)
            out.append(
                {
                    "call": call,
                    "hook_kind": kind,
                    "draft": draft,
                    "concurrency": conc,
                    "base": plain,
                    "eagle3": spec,
                    "adaptive": adaptive,
                    "hook": hook,
                    "hook_vs_best_pct": round(100 * (hook / best - 1), 1),
                    "noise_pct": None if noise is None else round(noise, 1),
                    "paired_pct": pair[0],
                    "paired_se_pct": pair[1],
                    # about 1.0: off through the level; more: it speculated for part of it
                    "hook_tokens_per_verify": by[(call, kind, draft, conc)].get(
                        "tokens_per_verify"
                    ),
                    "note": "; ".join(sorted({h for h in (how, how_a) if h})),
                }
            )
    return out


def same_work(rows: Sequence[dict]) -> list[dict]:
    """Pairs of servers of one call doing the same work at a concurrency: the noise between
    server processes. A replica (``base-X``, ``LABEL+R``) against its configuration's first
    server; a hook that speculated throughout the level (its tokens per verify within 2% of
    EAGLE-3's with the same draft) against EAGLE-3.
    """
    by = {(r["call"], r["label"], r["concurrency"]): r for r in rows}
    out = []
    for r in rows:
        if r.get("replica"):
            other = by.get((r["call"], r["primary"], r["concurrency"]))
        elif r["kind"] in HOOKS:
            other = by.get((r["call"], f"eagle3-{r['draft']}", r["concurrency"]))
            mine, theirs = r.get("tokens_per_verify"), other and other.get("tokens_per_verify")
            if not (mine and theirs and abs(mine / theirs - 1) <= 0.02):
                continue
        else:
            continue
        if other is not None:
            diff = 100 * (r["tok_per_s"] / other["tok_per_s"] - 1)
            out.append(
                {
                    "call": r["call"],
                    "server": r["label"],
                    "against": other["label"],
                    "concurrency": r["concurrency"],
                    "diff_pct": round(diff, 1),
                }
            )
    return sorted(out, key=lambda x: (x["call"], x["server"], x["concurrency"]))


def greedy_summary(greedy: Sequence[dict]) -> dict[tuple[str, str], dict[str, int]]:
    def reference(label: str) -> str:
        return "base-tiny" if label.partition("+")[0].endswith("-tiny") else "base"

    ref = {
        (g["call"], g["label"], g["pass"], g["prompt"]): g["output_ids"]
        for g in greedy
        if g["label"] in ("base", "base-tiny")
    }
    summary: dict[tuple[str, str], dict[str, int]] = {}
    for g in greedy:
        s = summary.setdefault((g["call"], g["label"]), {"expected": 0, "same_as_base": 0, "n": 0})
        s["n"] += 1
        s["expected"] += bool(g["expected"])
        key = (g["call"], reference(g["label"]), g["pass"], g["prompt"])
        s["same_as_base"] += ref.get(key) == g["output_ids"]
    return summary


def fmt(x: float | None, spec: str = ".0f", unit: str = "", prefix: str = "") -> str:
    return "" if x is None else prefix + format(x, spec) + unit


def markdown(
    rows: Sequence[dict], comp: Sequence[dict], greedy: dict, pairs: Sequence[dict] = ()
) -> str:
    concs = sorted({r["concurrency"] for r in rows})
    lines = [
        "| call | server | " + " | ".join(f"c={c}" for c in concs) + " | tokens/verify |",
        "|" + " --- |" * (len(concs) + 3),
    ]
    for call, label in sorted({(r["call"], r["label"]) for r in rows}):
        mine = {r["concurrency"]: r for r in rows if r["call"] == call and r["label"] == label}
        tpv = [r["tokens_per_verify"] for r in mine.values() if r.get("tokens_per_verify")]
        cells = [
            f"{mine[c]['tok_per_s']:.0f} ±{mine[c]['spread_pct'] / 2:.0f}%" if c in mine else ""
            for c in concs
        ]
        accept = f"{min(tpv):.2f}-{max(tpv):.2f}" if tpv else ""
        lines.append(f"| {call} | {label} | " + " | ".join(cells) + f" | {accept} |")
    if comp:
        lines += [
            "",
            "| call | hook | draft | c | base | eagle3 | adaptive | hook | hook vs best "
            "| ± (1 s.e.) | paired, same turns | hook tokens/verify | note |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
            "| --- |",
        ]
        for c in comp:
            lines.append(
                f"| {c['call']} | {c['hook_kind']} | {c['draft']} | {c['concurrency']} | "
                f"{fmt(c['base'])} | "
                f"{fmt(c['eagle3'])} | {fmt(c['adaptive'])} | {fmt(c['hook'])} | "
                f"{c['hook_vs_best_pct']:+.1f}% | {fmt(c['noise_pct'], '.1f', '%')} | "
                f"{fmt(c['paired_pct'], '+.1f', '%')}{fmt(c['paired_se_pct'], '.1f', '%', ' ± ')} | "
                f"{fmt(c['hook_tokens_per_verify'], '.2f')} | {c['note']} |"
            )
    pooled_calls = across_calls(comp)
    if pooled_calls:
        lines += [
            "",
            "Paired, pooled over calls (inverse-variance weighted, ± 1 s.e.):",
            "",
            "| hook | draft | c | calls | hook vs best, paired |",
            "| --- | --- | ---: | --- | ---: |",
        ]
        lines += [
            f"| {x['hook_kind']} | {x['draft']} | {x['concurrency']} | {', '.join(x['calls'])} | "
            f"{x['paired_pct']:+.1f}% ± {x['paired_se_pct']:.1f}% |"
            for x in pooled_calls
        ]
    if pairs:
        diffs = [p["diff_pct"] for p in pairs]
        lines += [
            "",
            f"Same work on two servers of one call (between-server noise): {min(diffs):+.1f}% "
            f"to {max(diffs):+.1f}% over {len(pairs)} pairs",
            "",
            "| call | server | against | c | difference |",
            "| --- | --- | --- | ---: | ---: |",
        ]
        lines += [
            f"| {p['call']} | {p['server']} | {p['against']} | {p['concurrency']} | "
            f"{p['diff_pct']:+.1f}% |"
            for p in pairs
        ]
    if greedy:
        lines += [
            "",
            "| call | server | outputs as the target defines (x+1) | same as base (same models) |",
            "| --- | --- | ---: | ---: |",
        ]
        for (call, label), s in sorted(greedy.items()):
            lines.append(
                f"| {call} | {label} | {s['expected']}/{s['n']} | {s['same_as_base']}/{s['n']} |"
            )
    return "\n".join(lines) + "\n"


def warmup_markdown(comp: Sequence[dict]) -> str:
    """The warm-up turns, not scored: what the first turn at each level cost each hook (its
    first measurements there; the kernels of new shapes, compiled by the first server)."""
    if not comp:
        return ""
    lines = [
        "",
        "Warm-up turns, not scored (the first turn of every server at each level: its first "
        "shapes compiled, a policy's first decisions there):",
        "",
        "| call | hook | draft | c | base | eagle3 | hook | hook vs best |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {c['call']} | {c['hook_kind']} | {c['draft']} | {c['concurrency']} | "
        f"{fmt(c['base'])} | {fmt(c['eagle3'])} | {fmt(c['hook'])} | {c['hook_vs_best_pct']:+.1f}% |"
        for c in comp
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", type=Path, nargs="+")
    p.add_argument("--csv", type=Path)
    p.add_argument("--md", type=Path)
    p.add_argument("--plot", type=Path)
    p.add_argument(
        "--pool-replicas",
        action="store_true",
        help="pool each configuration's servers (LABEL, LABEL+R, base-X) before comparing",
    )
    p.add_argument("--ratio", type=float, default=0.97, help="the claim: hook >= RATIO x better")
    p.add_argument(
        "--off-ratio", type=float, default=0.99, help="the cost of off: held off >= RATIO x base"
    )
    p.add_argument("--max-se", type=float, default=1.0, help="a claim's largest s.e., in %%")
    p.add_argument("--min-turns", type=int, default=4, help="turns a claim's s.e. rests on")
    a = p.parse_args()
    definitions = (
        replace(HOOK_CLAIM, rule=ClaimRule(a.ratio, a.max_se, a.min_turns)),
        replace(OFF_COST_CLAIM, rule=ClaimRule(a.off_ratio, a.max_se, a.min_turns)),
    )
    rows, warm, greedy, failed = load_turns(a.runs)
    pairs = same_work(rows)
    floors = aa_floors(rows)  # each server of an A/A pair on its own, before any pooling
    if a.pool_replicas:
        rows = pooled(rows)
    comp = comparison(rows)
    text = markdown(rows, comp, greedy_summary(greedy), pairs) + verdicts_markdown(
        rows, floors, loads(rows), definitions
    )
    text += warmup_markdown(comparison(warm)) + failed_markdown(failed)
    print(text)
    if a.md:
        a.md.write_text(text)
    if a.csv:
        keys = [
            "call",
            "label",
            "kind",
            "draft",
            "concurrency",
            "tok_per_s",
            "spread_pct",
            "se_pct",
            "tokens_per_verify",
            "requests",
            "errors",
            "lat_p50_s",
            "repeats",
        ]
        with a.csv.open("w", newline="") as f:
            w = csv.DictWriter(f, keys, extrasaction="ignore")
            w.writeheader()
            w.writerows(sorted(rows, key=lambda r: (r["call"], r["label"], r["concurrency"])))
    if a.plot:
        plot(rows, a.plot)


if __name__ == "__main__":
    main()
