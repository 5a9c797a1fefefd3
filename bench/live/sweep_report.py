#!/usr/bin/env python3
"""Tables, CSV and plot from sweep.sh runs: tokens/s by concurrency, per server and draft.

    sweep_report.py RUN_DIR... --csv bench/results/live_sweep.csv \
        --md bench/results/live/sweep.md --plot bench/results/img/live-sweep-0.5.16.svg

Each RUN_DIR holds one device call's ``sweep.jsonl`` (and ``greedy.jsonl``); the call is named
after the directory. A server label is ``KIND`` or ``KIND-DRAFT`` (``eagle3-high``). Where one
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
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

KINDS = ("base", "eagle3", "adaptive", "hook", "hooktraced", "eagle3traced")
HOOKS = ("hook", "hookcold")  # the hook deciding (off: draft KV kept current, or not)


def merged(levels):
    """One row from the repeats of a (server, concurrency): all windows pooled.

    ``se_pct``: the standard error of the mean over the windows, in % of the mean (None with
    one window).
    """
    rates = [r for row in levels for r in row["window_tok_per_s"]]
    mean = sum(rates) / len(rates)
    # each window by (round tag, turn, index): what a paired comparison matches across servers
    # (two servers' windows of one key, pooled replicas, are averaged)
    turns = {}
    for row in levels:
        for k, r in enumerate(row["window_tok_per_s"]):
            turns.setdefault((row.get("tag", ""), row.get("rep", 1), k), []).append(r)
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


def paired(mine, other):
    """Mean and standard error (in %) of ``mine / other - 1`` over the windows both servers
    measured in the same turn (``sweep_load.py --targets --reps``: a few seconds apart), or
    (None, None) with fewer than two such windows."""
    a, b = mine.get("turns") or {}, other.get("turns") or {}
    ratios = [a[k] / b[k] - 1 for k in sorted(set(a) & set(b)) if b[k]]
    if len(ratios) < 2:
        return None, None
    mean = sum(ratios) / len(ratios)
    var = sum((x - mean) ** 2 for x in ratios) / (len(ratios) - 1)
    return round(100 * mean, 1), round(100 * (var / len(ratios)) ** 0.5, 1)


def load(run_dirs):
    rows, greedy = [], []
    for run in run_dirs:
        levels = {}
        for line in (run / "sweep.jsonl").read_text().splitlines():
            row = json.loads(line)
            if "concurrency" in row:
                levels.setdefault((row["label"], row["concurrency"]), []).append(row)
        for (label, _), repeats in sorted(levels.items()):
            head, _, again = label.partition("+")  # LABEL+R: a second server of LABEL
            kind, _, draft = head.partition("-")
            row = {**merged(repeats), "call": run.name, "kind": kind, "draft": draft}
            if kind == "base" and draft:  # base-X: no draft, a second server
                row.update(draft="", replica=draft, primary="base")
            elif again:
                row.update(replica=again, primary=head)
            rows.append(row)
        path = run / "greedy.jsonl"
        for line in path.read_text().splitlines() if path.exists() else ():
            greedy.append({**json.loads(line), "call": run.name})
    return rows, greedy


def pooled(rows):
    """Each configuration's servers of one call (primary and replicas) as one row a level."""
    groups = {}
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


def table(rows):
    """{(call, kind, draft, conc): row}, and the base rate per (call, conc); replicas left out."""
    compared = [r for r in rows if not r.get("replica")]
    by = {(r["call"], r["kind"], r["draft"], r["concurrency"]): r for r in compared}
    base = {(r["call"], r["concurrency"]): r["tok_per_s"] for r in compared if r["kind"] == "base"}
    return by, base


def loads(rows):
    """{call: the load it applied}: its requests' max_new_tokens spread (0 when not recorded)."""
    return {r["call"]: r.get("max_new_spread", 0.0) for r in rows}


def quadrature(*errors):
    """The combined error of independent ones (in %): None when any is unknown."""
    return None if None in errors else sum(x * x for x in errors) ** 0.5


def rate(by, base, load, kind, draft, conc, call):
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


def comparison(rows):
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


def across_calls(comp):
    """The paired comparisons of one hook configuration (kind, draft) at a concurrency pooled
    over the calls that measured it: the inverse-variance weighted mean and its standard error
    (calls without a paired error left out); only where two calls or more contribute."""
    groups = {}
    for c in comp:
        if c["paired_pct"] is not None and c["paired_se_pct"]:
            key = (c["hook_kind"], c["draft"], c["concurrency"])
            groups.setdefault(key, []).append(c)
    out = []
    for (kind, draft, conc), group in sorted(groups.items()):
        if len(group) < 2:
            continue
        weights = [1 / c["paired_se_pct"] ** 2 for c in group]
        mean = sum(w * c["paired_pct"] for w, c in zip(weights, group, strict=True))
        out.append(
            {
                "hook_kind": kind,
                "draft": draft,
                "concurrency": conc,
                "calls": [c["call"] for c in group],
                "paired_pct": round(mean / sum(weights), 1),
                "paired_se_pct": round(sum(weights) ** -0.5, 1),
            }
        )
    return out


def same_work(rows):
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


def greedy_summary(greedy):
    def reference(label):
        return "base-tiny" if label.partition("+")[0].endswith("-tiny") else "base"

    ref = {
        (g["call"], g["label"], g["pass"], g["prompt"]): g["output_ids"]
        for g in greedy
        if g["label"] in ("base", "base-tiny")
    }
    summary = {}
    for g in greedy:
        s = summary.setdefault((g["call"], g["label"]), {"expected": 0, "same_as_base": 0, "n": 0})
        s["n"] += 1
        s["expected"] += bool(g["expected"])
        key = (g["call"], reference(g["label"]), g["pass"], g["prompt"])
        s["same_as_base"] += ref.get(key) == g["output_ids"]
    return summary


def fmt(x, spec=".0f", unit="", prefix=""):
    return "" if x is None else prefix + format(x, spec) + unit


def markdown(rows, comp, greedy, pairs=()):
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


STYLES = {
    "base": ("black", "-"),
    "eagle3": ("tab:red", "-"),
    "adaptive": ("tab:orange", "--"),
    "hook": ("tab:green", "-"),
    "hookcold": ("tab:cyan", "-"),
    "hookoff": ("tab:purple", ":"),
    "hookoffskip": ("tab:blue", ":"),
    "hooktraced": ("tab:green", ":"),
    "eagle3traced": ("tab:red", ":"),
}


def plot(rows, path):
    """Per draft, a column: tokens/s (top) and tokens/s over the same call's base (bottom)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = {"high": 0, "mid": 1, "low": 2}  # by acceptance, where the names say it
    drafts = sorted({r["draft"] for r in rows if r["draft"]}, key=lambda d: (order.get(d, 3), d))
    _, base = table(rows)
    concs = sorted({r["concurrency"] for r in rows})
    fig, axes = plt.subplots(
        2, len(drafts), figsize=(6.5 * len(drafts), 8), squeeze=False, sharex=True
    )
    for col, draft in enumerate(drafts):
        top, bottom = axes[0][col], axes[1][col]
        for call, label in sorted({(r["call"], r["label"]) for r in rows}):
            mine = sorted(
                (
                    r
                    for r in rows
                    if r["call"] == call and r["label"] == label and r["draft"] in ("", draft)
                ),
                key=lambda r: r["concurrency"],
            )
            if len(mine) < 2:
                continue
            replica = mine[0].get("replica")  # a second server: the noise, in gray
            color, dash = ("gray", ":") if replica else STYLES.get(mine[0]["kind"], ("gray", "-"))
            xs = [r["concurrency"] for r in mine]
            top.errorbar(
                xs,
                [r["tok_per_s"] for r in mine],
                yerr=[r["tok_per_s"] * (r["spread_pct"] or 0) / 200 for r in mine],
                color=color,
                linestyle=dash,
                marker="o",
                ms=3,
                capsize=2,
                label=f"{label} ({call})",
            )
            bottom.plot(
                xs,
                [r["tok_per_s"] / base[(call, r["concurrency"])] for r in mine],
                color=color,
                linestyle=dash,
                marker="o",
                ms=3,
                label=f"{label} ({call})",
            )
        tpv = [
            r["tokens_per_verify"]
            for r in rows
            if r["kind"] == "eagle3" and r["draft"] == draft and r.get("tokens_per_verify")
        ]
        title = f"draft '{draft}'" + (
            f": EAGLE-3 accepts {sum(tpv) / len(tpv):.2f} tokens/verify" if tpv else ""
        )
        top.set(xscale="log", yscale="log", ylabel="tokens/s", title=title)
        bottom.set(xscale="log", xlabel="concurrency", ylabel="tokens/s over no speculation")
        bottom.axhline(1.0, color="black", linewidth=0.8)
        for ax in (top, bottom):
            ax.set_xticks(concs)
            ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
            ax.grid(True, which="both", alpha=0.3)
        top.legend(fontsize=7)
    fig.suptitle("SGLang 0.5.16 on one H200: synthetic 7B Llama target + EAGLE-3 draft")
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None} if str(path).endswith(".svg") else None)


def main():
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
    a = p.parse_args()
    rows, greedy = load(a.runs)
    pairs = same_work(rows)
    if a.pool_replicas:
        rows = pooled(rows)
    comp = comparison(rows)
    text = markdown(rows, comp, greedy_summary(greedy), pairs)
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
