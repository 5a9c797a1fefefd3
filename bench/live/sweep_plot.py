"""The plot of sweep_report.py: tokens/s by concurrency per draft, and the ratio to no
speculation of the same call (matplotlib, imported only when a plot is asked for)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sweep_stats import table

STYLES = {
    "base": ("black", "-"),
    "eagle3": ("tab:red", "-"),
    "adaptive": ("tab:orange", "--"),
    "hook": ("tab:green", "-"),
    # hookcold, hookoff, hookoffskip: recorded calls of the zero-step off state of the hook before
    "hookcold": ("tab:cyan", "-"),
    "hookoff": ("tab:purple", ":"),
    "hookoffskip": ("tab:blue", ":"),
    "plainoff": ("tab:brown", ":"),
    "hooktraced": ("tab:green", ":"),
    "eagle3traced": ("tab:red", ":"),
}


def plot(rows: Sequence[dict], path: Path) -> None:
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
