"""Merge a trace into one Chrome trace-event JSON that Perfetto and viztracer's viewer open.

Each process is a ``pid``; each rank a ``tid`` inside it; each recorded call a complete
(``"X"``) event named by its qualified name, with the role as category and step and facts as
arguments. Decisions also become counter (``"C"``) tracks, so Perfetto draws speculation on/off
and the batch size over time. Times start at 0 (the first recorded call) and events are sorted,
so the same trace always gives the same file.

>>> from sgtrace.tracer.load import load_trace  # doctest: +SKIP
>>> render_chrome_trace(load_trace(Path("out")))["traceEvents"][0]["ph"]  # doctest: +SKIP
'M'
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from sgtrace.tracer.events import Role, TraceEvent
from sgtrace.tracer.load import Trace

MERGED_FILE = "trace.json"


def _us(ns: int) -> float:
    return round(ns / 1000, 3)


def _call(event: TraceEvent, origin: int) -> dict[str, object]:
    args: dict[str, object] = {"function": str(event.function), "step": event.step}
    args.update(event.facts.to_json())
    if event.error is not None:
        args["error"] = event.error
    return {
        "ph": "X",
        "name": event.function.qualname,
        "cat": event.role.value,
        "pid": event.pid,
        "tid": event.rank,
        "ts": _us(event.start_ns - origin),
        "dur": _us(event.duration_ns),
        "args": args,
    }


def _counters(event: TraceEvent, origin: int) -> list[dict[str, object]]:
    facts = event.facts
    base = {"ph": "C", "pid": event.pid, "tid": event.rank, "ts": _us(event.start_ns - origin)}
    out: list[dict[str, object]] = []
    if facts.spec_on is not None:
        out.append({**base, "name": "speculation on", "args": {"on": int(facts.spec_on)}})
    if facts.batch_size is not None:
        out.append({**base, "name": "batch size", "args": {"requests": facts.batch_size}})
    return out


def _metadata(trace: Trace) -> list[dict[str, object]]:
    ranks_of: dict[int, Counter[int]] = {}
    for event in trace.events:
        ranks_of.setdefault(event.pid, Counter())[event.rank] += 1
    out: list[dict[str, object]] = []
    for pid in sorted(ranks_of):
        main_rank = ranks_of[pid].most_common(1)[0][0]
        label = f"rank {main_rank} (pid {pid})"
        out.append(
            {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": label}}
        )
        out.append(
            {
                "ph": "M",
                "name": "process_sort_index",
                "pid": pid,
                "tid": 0,
                "args": {"sort_index": main_rank},
            }
        )
        for rank in sorted(ranks_of[pid]):
            out.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": pid,
                    "tid": rank,
                    "args": {"name": f"rank {rank}"},
                }
            )
    return out


def render_chrome_trace(trace: Trace) -> dict[str, object]:
    """The merged Chrome trace of ``trace`` as a JSON-ready dict (no I/O)."""
    origin = min((event.start_ns for event in trace.events), default=0)
    timed: list[dict[str, object]] = []
    for event in trace.events:
        timed.append(_call(event, origin))
        if event.role is Role.DECISION:
            timed.extend(_counters(event, origin))
    timed.sort(
        key=lambda e: (e["pid"], e["tid"], e["ts"], -float(e.get("dur", 0)), e["ph"], e["name"])  # type: ignore[arg-type]
    )
    return {
        "traceEvents": _metadata(trace) + timed,
        "displayTimeUnit": "ms",
        "otherData": {"generator": "sgtrace", "processes": len(trace.processes)},
    }


def write_chrome_trace(trace: Trace, path: Path) -> Path:
    """Write :func:`render_chrome_trace` to ``path`` and return it."""
    path.write_text(json.dumps(render_chrome_trace(trace), indent=1) + "\n", encoding="utf-8")
    return path
