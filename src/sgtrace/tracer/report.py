"""A picture of a trace: per rank over scheduler steps, batch size, speculation on/off, accept
length and decode throughput.

:func:`step_series` computes the numbers (pure); :func:`render_report` draws them with
matplotlib into an SVG or PNG, or an HTML page with the SVG inline and a summary table.
Throughput of a step is the tokens it committed (the sum of accept lengths, or one per request
when nothing was verified) over the time to the next step's start on that rank.

>>> from sgtrace.tracer.steps import group_steps
>>> step_series(group_steps([]))
{}
"""

from __future__ import annotations

import html
import io
import statistics
from dataclasses import dataclass
from pathlib import Path

from sgtrace.errors import SgtraceError
from sgtrace.tracer.events import Role
from sgtrace.tracer.load import Trace, load_trace
from sgtrace.tracer.steps import StepRecord, trace_steps

PANELS = (
    "Batch size (requests in the decode batch)",
    "Speculation (decision of the hook)",
    "Accept length (tokens per request per step)",
    "Decode throughput (tokens/s)",
)
FORMATS = (".svg", ".png", ".html")


@dataclass(frozen=True)
class StepPoint:
    """One decode step of one rank, as drawn."""

    step: int
    batch_size: int | None
    spec_on: bool | None
    accept_length: float | None
    tokens: float | None
    throughput: float | None


def _point(record: StepRecord, next_start: int | None) -> StepPoint:
    decision = record.governing
    launches = (
        record.ran(Role.STEP) + record.ran(Role.SPEC_FORWARD) + record.ran(Role.DECODE_RESULT)
    )
    sizes = [e.facts.batch_size for e in launches if e.facts.batch_size is not None]
    batch_size = sizes[0] if sizes else (decision.record.batch_size if decision else None)
    lengths = [a for e in record.ran(Role.DECODE_RESULT) for a in e.facts.accept_lengths or ()]
    accept = statistics.fmean(lengths) if lengths else None
    spec_on = decision.spec_on if decision else None
    if lengths:
        tokens: float | None = sum(lengths)
    elif batch_size is not None and spec_on is False:
        tokens = float(batch_size)  # a one-token verify or a plain decode
    else:
        tokens = None
    elapsed = None if next_start is None else (next_start - record.start_ns) / 1e9
    rate = tokens / elapsed if tokens is not None and elapsed else None
    return StepPoint(record.step, batch_size, spec_on, accept, tokens, rate)


def step_series(records: tuple[StepRecord, ...]) -> dict[int, list[StepPoint]]:
    """Decode steps per rank; ``spec_on`` is the decision in force (``None`` before the first)."""
    by_rank: dict[int, list[StepRecord]] = {}
    for record in records:
        by_rank.setdefault(record.rank, []).append(record)
    series: dict[int, list[StepPoint]] = {}
    for rank, ranked in sorted(by_rank.items()):
        ranked.sort(key=lambda r: r.step)
        points = []
        for index, record in enumerate(ranked):
            if not record.is_decode:
                continue
            following = ranked[index + 1].start_ns if index + 1 < len(ranked) else None
            points.append(_point(record, following))
        if points:
            series[rank] = points
    return series


def _draw(series: dict[int, list[StepPoint]], title: str, out: io.BytesIO | Path, fmt: str) -> None:
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise SgtraceError("sgtrace report needs matplotlib: pip install 'sgtrace[trace]'") from exc
    figure = Figure(figsize=(11, 10), layout="constrained")
    axes = figure.subplots(4, 1, sharex=True)
    for rank, points in series.items():
        steps = [p.step for p in points]
        label = f"rank {rank}"
        axes[0].plot(steps, [p.batch_size for p in points], label=label)
        on = [None if p.spec_on is None else int(p.spec_on) for p in points]
        axes[1].plot(steps, on, drawstyle="steps-post", label=label)
        axes[2].plot(steps, [p.accept_length for p in points], marker=".", label=label)
        axes[3].plot(steps, [p.throughput for p in points], label=label)
    for ax, panel in zip(axes, PANELS, strict=False):
        ax.set_title(panel, loc="left")
        ax.grid(alpha=0.3)
    axes[1].set_yticks([0, 1], ["off", "on"])
    axes[3].set_xlabel("scheduler step (forward_ct)")
    axes[0].legend(loc="upper right")
    figure.suptitle(title)
    metadata = {"Date": None} if fmt == "svg" else {}
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "sgtrace"}):
        figure.savefig(out, format=fmt, metadata=metadata)


def _html(series: dict[int, list[StepPoint]], title: str) -> str:
    buffer = io.BytesIO()
    _draw(series, title, buffer, "svg")
    svg = buffer.getvalue().decode("utf-8")
    svg = svg[svg.index("<svg") :]
    rows = []
    for rank, points in series.items():
        on = sum(1 for p in points if p.spec_on)
        rates = [p.throughput for p in points if p.throughput is not None]
        mean_rate = f"{statistics.fmean(rates):.1f}" if rates else "-"
        rows.append(
            f"<tr><td>{rank}</td><td>{len(points)}</td><td>{on}</td>"
            f"<td>{len(points) - on}</td><td>{mean_rate}</td></tr>"
        )
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        "</head><body>\n"
        f"<h1>{html.escape(title)}</h1>\n<table border='1' cellpadding='4'>"
        "<tr><th>rank</th><th>decode steps</th><th>on</th><th>off</th>"
        "<th>mean tokens/s</th></tr>\n"
        + "\n".join(rows)
        + "\n</table>\n"
        + svg
        + "</body></html>\n"
    )


def render_report(trace_dir: Path, out: Path) -> Path:
    """Draw the trace in ``trace_dir`` into ``out`` (``.svg``, ``.png`` or ``.html``)."""
    return draw_trace(load_trace(trace_dir), trace_dir, out)


def draw_trace(trace: Trace, trace_dir: Path, out: Path) -> Path:
    """Draw a loaded trace (its lines skipped by the loader are in ``trace.warnings``)."""
    fmt = out.suffix.lower()
    if fmt not in FORMATS:
        raise SgtraceError(f"cannot write a report as {out.name!r}: name it .svg, .png or .html")
    series = step_series(trace_steps(trace))
    if not series:
        raise SgtraceError(
            f"no decode steps in {trace_dir}: nothing to draw (were the speculative worker "
            "and the hook's decision selected?)"
        )
    title = f"sgtrace: {trace_dir.name}"
    if fmt == ".html":
        out.write_text(_html(series, title), encoding="utf-8")
    else:
        _draw(series, title, out, fmt[1:])
    return out
