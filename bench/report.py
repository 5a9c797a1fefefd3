"""Benchmark rows and their rendering as a markdown table and CSV.

Targets are goals to print next to the measurement ("measured vs target"), never assertions.

>>> Target(3.0).describe()
'< 3 s'
>>> Target(60.0, 1536.0).describe()
'< 60 s, < 1.5 GiB'
"""

from __future__ import annotations

import csv
import io
import os
import platform
from dataclasses import dataclass

from measure import Measurement, Outcome


@dataclass(frozen=True)
class Target:
    """What a row should take: at most ``wall_s`` seconds and, if set, ``peak_mib`` MiB."""

    wall_s: float
    peak_mib: float | None = None

    def describe(self) -> str:
        """The target as written in the table, e.g. ``< 60 s, < 1.5 GiB``."""
        text = f"< {self.wall_s:g} s"
        if self.peak_mib is not None:
            text += f", < {self.peak_mib / 1024:g} GiB"
        return text

    def misses(self, m: Measurement) -> list[str]:
        """What ``m`` misses of this target (empty when it meets it)."""
        missed = []
        if m.outcome != Outcome.OK:
            missed.append(m.outcome.value)
        if m.wall_s >= self.wall_s:
            missed.append(f"time x{m.wall_s / self.wall_s:.1f}")
        if self.peak_mib is not None and m.peak_mib >= self.peak_mib:
            missed.append(f"memory x{m.peak_mib / self.peak_mib:.1f}")
        return missed


@dataclass(frozen=True)
class Row:
    """One measured (or skipped) row of the table."""

    row_id: str
    tool: str
    input: str
    cache: str
    target: Target | None
    measurement: Measurement | None  # None: skipped
    note: str
    load_1m: float | None = None  # the machine's load average when the row started

    def status_text(self) -> str:
        """``ok``, ``crash``, ``timeout``, ``over memory cap`` or ``skipped``."""
        return self.measurement.outcome.value if self.measurement else "skipped"

    def verdict(self) -> str:
        """``meets`` or ``MISSES (why)`` against the target; empty without a target."""
        if self.target is None:
            return ""
        if self.measurement is None:
            return "not measured"
        missed = self.target.misses(self.measurement)
        return f"MISSES ({', '.join(missed)})" if missed else "meets"


HEADER = (
    "row",
    "tool",
    "input",
    "cache",
    "status",
    "wall s",
    "cpu s",
    "peak MiB",
    "largest process MiB",
    "load",
    "target",
    "verdict",
    "notes",
)


def _cells(row: Row) -> tuple[str, ...]:
    m = row.measurement
    numbers = (
        (f"{m.wall_s:.2f}", f"{m.cpu_s:.2f}", f"{m.peak_mib:.0f}", f"{m.largest_process_mib:.0f}")
        if m
        else ("", "", "", "")
    )
    load = f"{row.load_1m:.1f}" if row.load_1m is not None else ""
    target = row.target.describe() if row.target else ""
    return (
        row.row_id,
        row.tool,
        row.input,
        row.cache,
        row.status_text(),
        *numbers,
        load,
        target,
        row.verdict(),
        row.note,
    )


def render_markdown(rows: list[Row], context: dict[str, str]) -> str:
    """The results page: context lines, the table, then the stderr tail of each failed row."""
    lines = ["# Static engine benchmark", ""]
    machine = f"{os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}"
    lines += [f"- machine: {machine}"] + [f"- {k}: {v}" for k, v in context.items()]
    lines += [
        "- wall s: wall-clock time of the whole command, interpreter start-up included; cpu s: "
        "user + system time of the command and the processes it reaped (its parse pool)",
        "- load: 1-minute load average when the row started; above the core count, other work "
        "shared the machine and wall times are inflated (cpu s much less so)",
        "- peak MiB: the largest resident memory of the process tree (VmRSS summed over the "
        "command and its pool workers, sampled every 50 ms); largest process MiB: the highest "
        "VmHWM of one process in the tree (see bench/measure.py)",
        "- cold: fresh `--cache-dir`; warm: the same directory again right after",
        "- libcst/ast rows parse the files sequentially in one process; pyan3 analyses only the "
        "files given, JARVIS follows imports from them within `--package`",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in _cells(r)) + " |" for r in rows]
    for r in rows:
        if r.measurement is not None and r.measurement.outcome != Outcome.OK:
            lines += [
                "",
                f"## {r.row_id}: {r.status_text()}",
                "",
                "```",
                r.measurement.stderr_tail or "(no stderr)",
                "```",
            ]
    return "\n".join(lines) + "\n"


def render_csv(rows: list[Row]) -> str:
    """The same table as CSV, one row per measurement."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(HEADER)
    writer.writerows(_cells(r) for r in rows)
    return buffer.getvalue()
