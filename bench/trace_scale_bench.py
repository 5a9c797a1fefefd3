"""Benchmark reading a large trace: load, validate, merge and report, up to a million events.

Issue 23 measured ``sgtrace validate`` and ``sgtrace report`` on a million-event trace at
2,365 s and 1,176 s: ``tracer/steps.py`` rebuilt the list of launch start times for every
decision, so the time grew with the square of the trace. This benchmark writes synthetic
traces shaped like SGLang's EAGLE v2 decode path (what ``sgtrace trace`` records with the
built-in selection: per decode step ``run_batch``, the speculative and target forwards, the
hook's decision, draft and draft forward while on, verify, draft extend, the decode-result
handler; two TP ranks, one process each; speculation on and off in turns of 500 steps) and
times, on each size, in this process:

* ``load``: :func:`sgtrace.tracer.load.load_trace`;
* ``validate``: :func:`sgtrace.tracer.validate.check_trace` on the loaded trace with the
  zero-step rules (its off steps verify one token and extend the draft, as upstream's zero-step
  state; the verdict must be OK: every step is checked);
* ``merge``: :func:`sgtrace.tracer.merge.render_chrome_trace`;
* ``report``: :func:`sgtrace.tracer.report.render_report` to SVG, end to end (load included).

Linear code shows a constant time per event across sizes. CPU time of this process (not wall
time: on a shared machine, waiting for a core is not sgtrace's cost). Results go to
``bench/results/trace_scale.md`` and ``trace_scale.csv``::

    python bench/trace_scale_bench.py                       # 125k, 250k, 500k, 1M events
    python bench/trace_scale_bench.py --events 1000000 --no-report
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sgtrace.tracer.load import load_trace
from sgtrace.tracer.merge import render_chrome_trace
from sgtrace.tracer.report import render_report
from sgtrace.tracer.rules import ZERO_STEP_RULES
from sgtrace.tracer.validate import check_trace

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = (125_000, 250_000, 500_000, 1_000_000)
RANKS = 2
TURN = 500  # decode steps between two toggles
BATCH = 16
NAMES = {
    "step": "sglang.srt.managers.scheduler:Scheduler.run_batch",
    "spec_forward": "sglang.srt.speculative.eagle_worker_v2:EAGLEWorkerV2.forward_batch_generation",
    "decision": "sgtrace_hook:record_decision",
    "draft": "sglang.srt.speculative.eagle_worker_v2:EagleDraftWorker.draft",
    "draft_forward": "sglang.srt.speculative.eagle_worker_v2:EagleDraftWorker.draft_forward",
    "verify": "sglang.srt.speculative.eagle_worker_v2:EAGLEWorkerV2.verify",
    "target_forward": "sglang.srt.managers.tp_worker:TpModelWorker.forward_batch_generation",
    "draft_extend_decode": "sglang.srt.speculative.eagle_worker_v2:"
    "EagleDraftWorker._draft_extend_for_decode",
    "decode_result": "sglang.srt.managers.scheduler_output_processor_mixin:"
    "SchedulerOutputProcessorMixin.process_batch_result_decode",
}


def step_calls(step: int) -> list[tuple[str, dict[str, object]]]:
    """The calls of one decode step, in start order (as ``tests/tracer/tracer_support.py``)."""
    on = (step // TURN) % 2 == 0
    width, steps, accepted = (4, 3, 2) if on else (1, 0, 1)
    decision = {
        "batch_size": BATCH,
        "spec_on": on,
        "changed": step % TURN == 0 and step > 0,
        "reason": "low-load" if on else "high-load",
        "hook_step": step,
        "accept_length": float(accepted),
    }
    drafting = [
        ("draft", {"batch_size": BATCH, "num_steps": 3, "topk": 1}),
        ("draft_forward", {"batch_size": BATCH, "num_steps": 3}),
    ]
    return [
        ("step", {"batch_size": BATCH, "forward_mode": "DECODE"}),
        (
            "spec_forward",
            {"batch_size": BATCH, "forward_mode": "DECODE", "num_steps": 3, "draft_width": 4},
        ),
        ("decision", decision),
        *(drafting if on else []),
        ("verify", {"batch_size": BATCH, "draft_width": width, "num_steps": steps}),
        ("target_forward", {"batch_size": BATCH, "forward_mode": "DECODE", "is_verify": True}),
        ("draft_extend_decode", {"batch_size": BATCH}),
        (
            "decode_result",
            {
                "batch_size": BATCH,
                "accept_lengths": [float(accepted)] * BATCH,
                "accepted_drafts": (accepted - 1) * BATCH,
            },
        ),
    ]


def rank_lines(rank: int, events: int) -> Iterator[str]:
    """The lines of one rank's ``events-<pid>.jsonl``: a process line, then whole decode steps
    up to ``events`` calls (a step cut short would rightly fail validation)."""
    pid = 1000 + rank
    header = {"type": "process", "pid": pid, "ppid": 1, "argv": ["python", "-m", "sglang"]}
    yield json.dumps({**header, "python": "3.12.1", "backend": "monitoring"}) + "\n"
    written, step, clock = 0, 0, 0
    while written + len(step_calls(step)) <= events:
        calls = step_calls(step)
        inside = len(calls) - 1  # run_batch lasts until the call before the decode result
        for index, (role, facts) in enumerate(calls):
            duration = 1000 * (inside - index) + 500 if role == "step" else 500
            call = {"type": "call", "fn": NAMES[role], "role": role, "rank": rank, "step": step}
            timing = {"t0": clock + 1000 * index, "dur": duration, "tid": 1}
            yield json.dumps({**call, **timing, "facts": facts}) + "\n"
        written += len(calls)
        clock += 1000 * (len(calls) + 1)
        step += 1


def write_trace(directory: Path, events: int) -> int:
    """A trace of about ``events`` calls spread over :data:`RANKS` processes; the count."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = 0
    for rank in range(RANKS):
        with (directory / f"events-{1000 + rank}.jsonl").open("w", encoding="utf-8") as out:
            for line in rank_lines(rank, events // RANKS):
                out.write(line)
                lines += 1
    return lines - RANKS


@dataclass(frozen=True)
class Row:
    events: int
    phase: str
    cpu_s: float

    @property
    def us_per_event(self) -> float:
        return self.cpu_s / self.events * 1e6


def timed(function: Callable[[], object]) -> tuple[float, object]:
    start = time.process_time()
    value = function()
    return time.process_time() - start, value


def measure(events: int, scratch: Path, with_report: bool) -> list[Row]:
    directory = scratch / f"trace-{events}"
    events = write_trace(directory, events)
    load_s, trace = timed(lambda: load_trace(directory))
    assert len(trace.events) == events, (len(trace.events), events)  # type: ignore[attr-defined]
    validate_s, verdict = timed(
        lambda: check_trace(trace, ZERO_STEP_RULES)  # type: ignore[arg-type]
    )
    assert verdict.is_valid, verdict.render()[:2000]  # type: ignore[attr-defined]
    merge_s, _ = timed(lambda: render_chrome_trace(trace))  # type: ignore[arg-type]
    rows = [
        Row(events, "load", load_s),
        Row(events, "validate", validate_s),
        Row(events, "merge", merge_s),
    ]
    if with_report:
        report_s, _ = timed(lambda: render_report(directory, scratch / f"report-{events}.svg"))
        rows.append(Row(events, "report (load + draw, svg)", report_s))
    for path in directory.iterdir():
        path.unlink()
    return rows


def render(rows: list[Row], command: str) -> str:
    phases = list(dict.fromkeys(row.phase for row in rows))
    sizes = sorted({row.events for row in rows})
    lines = [
        "# Reading a large trace: load, validate, merge, report",
        "",
        f"`{command}` on {platform.python_implementation()} {platform.python_version()}, "
        f"{platform.machine()}; CPU seconds of one process (µs per event in brackets). "
        "Synthetic traces shaped like SGLang's EAGLE v2 decode path, two ranks "
        "(bench/trace_scale_bench.py). `sgtrace validate` is load + validate. Before the fix, "
        "issue 23 measured validate at 2,365 s and report at 1,176 s on a million events.",
        "",
        "| events | " + " | ".join(phases) + " |",
        "| ---: | " + " | ".join("---:" for _ in phases) + " |",
    ]
    for size in sizes:
        cells = []
        for phase in phases:
            row = next((r for r in rows if r.events == size and r.phase == phase), None)
            cells.append("-" if row is None else f"{row.cpu_s:.1f} ({row.us_per_event:.1f})")
        lines.append(f"| {size:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--no-report", action="store_true", help="Skip drawing the report.")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="sgtrace-trace-scale-") as scratch:
        for events in args.events:
            measured = measure(events, Path(scratch), not args.no_report)
            print(
                f"{measured[0].events:,} events: "
                + ", ".join(f"{r.phase} {r.cpu_s:.1f} s" for r in measured),
                flush=True,
            )
            rows += measured
    args.out.mkdir(parents=True, exist_ok=True)
    given = sys.argv[1:] if argv is None else argv
    command = "python bench/trace_scale_bench.py " + " ".join(given)
    (args.out / "trace_scale.md").write_text(render(rows, command.strip()), encoding="utf-8")
    with (args.out / "trace_scale.csv").open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["events", "phase", "cpu_s", "us_per_event"])
        for row in rows:
            writer.writerow([row.events, row.phase, f"{row.cpu_s:.3f}", f"{row.us_per_event:.2f}"])


if __name__ == "__main__":
    main()
