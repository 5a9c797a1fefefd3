"""The policy benchmark's tables: ``policy.md`` (by draft, shape and level) and ``policy.csv``."""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from policy_machines import NEW_TOKENS, Derivation, LiveMachine, TurnNoise
from policy_sim import Noise
from policy_waves import Load

BAR = 0.97  # issue 21: at least 0.97x the better of no speculation and EAGLE-3


@dataclass(frozen=True)
class Cell:
    """One server at one level of one draft and shape: its relative time (the better
    reference's over its own) per seeded run (``relative``; ``quiet``: without host noise;
    ``first_turn``: quiet, the level's first turn only), the share of its decode steps run
    speculating and its toggles per turn (noisy runs)."""

    draft: str
    source: str
    accept: float
    shape: str
    level: int
    server: str
    relative: tuple[float, ...]
    quiet: tuple[float, ...]
    first_turn: tuple[float, ...]
    on_share: float
    toggles: float

    @property
    def mean(self) -> float:
        return statistics.fmean(self.relative)

    @property
    def sd(self) -> float:
        return statistics.stdev(self.relative) if len(self.relative) > 1 else 0.0

    @property
    def quiet_mean(self) -> float:
        return statistics.fmean(self.quiet)

    @property
    def first_turn_mean(self) -> float:
        return statistics.fmean(self.first_turn)

    @property
    def below_bar(self) -> float:
        """The share of runs below the bar."""
        return sum(r < BAR for r in self.relative) / len(self.relative)


@dataclass(frozen=True)
class Setting:
    """What the cells were computed with, for the report's text."""

    derivation: Derivation
    turns: TurnNoise
    machines: tuple[LiveMachine, ...]
    load: Load
    seeds: int
    noise: Noise
    command: str


CSV_FIELDS = (
    "draft",
    "source",
    "accept",
    "shape",
    "level",
    "server",
    "relative_mean",
    "relative_sd",
    "runs",
    "runs_below_bar",
    "quiet_mean",
    "quiet_first_turn",
    "on_share",
    "toggles_per_turn",
)


def render_csv(cells: Sequence[Cell]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for c in cells:
        writer.writerow(
            [c.draft, c.source, f"{c.accept:.3f}", c.shape, c.level, c.server]
            + [f"{c.mean:.4f}", f"{c.sd:.4f}", len(c.relative), f"{c.below_bar:.3f}"]
            + [f"{c.quiet_mean:.4f}", f"{c.first_turn_mean:.4f}"]
            + [f"{c.on_share:.3f}", f"{c.toggles:.2f}"]
        )
    return out.getvalue()


def _groups(cells: Sequence[Cell]) -> list[tuple[str, str]]:
    return list(dict.fromkeys((c.draft, c.shape) for c in cells))


def _servers(cells: Sequence[Cell]) -> list[str]:
    return list(dict.fromkeys(c.server for c in cells))


def _table(cells: Sequence[Cell], servers: Sequence[str], value: str) -> list[str]:
    """Rows of draft, shape and server; a column a level; ``value``: ``noisy`` (mean ± sd over
    runs, bold below the bar), ``quiet`` (mean), ``on`` (share of steps speculating)."""
    levels = sorted({c.level for c in cells})
    index = {(c.draft, c.shape, c.server, c.level): c for c in cells}
    lines = [
        "| draft (A) | shape | server | " + " | ".join(f"c={n}" for n in levels) + " |",
        "| --- | --- | --- | " + " | ".join("---:" for _ in levels) + " |",
    ]
    for draft, shape in _groups(cells):
        for server in servers:
            row = [index.get((draft, shape, server, n)) for n in levels]
            accept = next(c.accept for c in row if c is not None)
            texts = [_value(c, value) for c in row]
            lines.append(
                f"| {draft} ({accept:.2f}) | {shape} | {server} | " + " | ".join(texts) + " |"
            )
    return lines


def _value(cell: Cell | None, value: str) -> str:
    if cell is None:
        return ""
    if value == "on":
        return f"{cell.on_share:.2f}"
    mean = cell.quiet_mean if value == "quiet" else cell.mean
    text = f"{mean:.3f}" if value == "quiet" else f"{mean:.3f} ± {cell.sd:.3f}"
    return f"**{text}**" if mean < BAR else text


def _derivation(setting: Setting) -> list[str]:
    d = setting.derivation
    drafts = sorted(d.calls)
    levels = sorted(d.t_off)
    lines = [
        f"Fitted prefill stall p = {d.prefill_s * 1e3:.2f} ms. Step times in ms; "
        "speculative ones: the mean over the draft's calls, ± the calls' sd of the log ratio "
        "(relative), and the call count.",
        "",
        "| level | wave W (s) | t_off | "
        + " | ".join(f"t_on {s} (A {d.accepts[s]:.2f})" for s in drafts)
        + " | A/A turn sd |",
        "| ---: | ---: | ---: | " + " | ".join("---:" for _ in drafts) + " | ---: |",
    ]
    for n in levels:
        t_off = d.t_off[n]
        wave = t_off * (NEW_TOKENS - 1) + d.prefill_s
        cols = []
        for s in drafts:
            xs = d.logs.get((s, n), ())
            if not xs:
                cols.append("")
                continue
            sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
            cols.append(
                f"{t_off * math.exp(statistics.fmean(xs)) * 1e3:.2f} ± {sd:.0%} ({len(xs)})"
            )
        row = f"| {n} | {wave:.3f} | {t_off * 1e3:.2f} | " + " | ".join(cols)
        lines.append(row + f" | {setting.turns.sd(n):.1%} |")
    lines += [
        "",
        "Calls per recorded draft: "
        + "; ".join(f"{s}: {', '.join(d.calls[s])}" for s in drafts)
        + ".",
    ]
    lines += [
        "",
        "| plan draft | q | accept length | step times of | on's gain at 1 / 16 / 64 / 128 |",
    ]
    lines += ["| --- | ---: | ---: | --- | --- |"]
    for m in setting.machines:
        gains = " / ".join(
            f"{m.accept_length * m.seconds(n, False) / m.seconds(n, True):.2f}"
            for n in (1, 16, 64, 128)
        )
        lines.append(f"| {m.draft} | {m.q} | {m.accept_length:.3f} | {m.source} | {gains} |")
    for m in setting.machines:
        if "fitted" in m.source:  # policy_fit.py: the speculative step fitted to live waves
            steps = ", ".join(f"{x}: {y * 1e3:.2f}" for x, y in m.on.points)
            lines += [
                "",
                f"{m.draft}'s speculative step, {m.source} (`policy_fit.py`), ms: {steps}.",
            ]
    return lines


def render_markdown(cells: Sequence[Cell], setting: Setting) -> str:
    servers = _servers(cells)
    policies = [s for s in servers if s not in ("eagle3", "no-spec")]
    load, noise = setting.load, setting.noise
    lines = [
        "# Policy benchmark: the live crossover runs, simulated",
        "",
        f"    {setting.command}",
        "",
        "Generated by `bench/policy_bench.py` (the method: its docstring and those of "
        "`policy_machines.py`, `policy_waves.py`). Each policy's time for a level's waves "
        "relative to the better of EAGLE-3 and no speculation in the same run (`better / "
        f"policy`: 1.0 as fast, below {BAR} misses issue 21's bar, in bold). "
        f"{setting.seeds} simulated live runs per case, each {load.reps} turns a level "
        f"(levels {', '.join(map(str, load.levels))}); mean ± sd over the runs (the sd is what "
        "one live run's number would scatter by). Host noise: each turn's steps stretched by a "
        "factor drawn from the A/A pairs' per-turn differences at that level; each step by a "
        f"log-normal factor (sigma {noise.sigma}) and {noise.spikes:.0%} of the steps "
        f"{noise.spike}x (mean kept). `quiet`: the same runs without host noise.",
        "",
        "## Relative time, with host noise",
        "",
        *_table(cells, [*policies, "eagle3", "no-spec"], "noisy"),
        "",
        "## Relative time, quiet (what the mechanism costs)",
        "",
        *_table(cells, [*policies, "eagle3", "no-spec"], "quiet"),
        "",
        "## Share of decode steps run speculating (with host noise)",
        "",
        *_table(cells, [*policies, "eagle3"], "on"),
        "",
        "## Below the bar",
        "",
        *_below(cells, policies),
        "",
        "## The machines (from the live measurements; see `policy_machines.py`)",
        "",
        *_derivation(setting),
        "",
    ]
    return "\n".join(lines)


def _below(cells: Sequence[Cell], policies: Sequence[str]) -> list[str]:
    rows = [c for c in cells if c.server in policies and min(c.mean, c.quiet_mean) < BAR]
    if not rows:
        return [f"No policy's mean is below {BAR}."]
    lines = [
        "| server | draft | shape | level | mean ± sd | quiet | quiet, first turn | runs below "
        "| on share | toggles/turn |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in sorted(rows, key=lambda c: (policies.index(c.server), c.draft, c.shape, c.level)):
        lines.append(
            f"| {c.server} | {c.draft} | {c.shape} | {c.level} | {c.mean:.3f} ± {c.sd:.3f} | "
            f"{c.quiet_mean:.3f} | {c.first_turn_mean:.3f} | {c.below_bar:.0%} | "
            f"{c.on_share:.2f} | {c.toggles:.1f} |"
        )
    return lines
