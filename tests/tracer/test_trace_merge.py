"""The merged Chrome/Perfetto trace: whole-output comparison, and the file ``trace`` writes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tracer_support import Call, write_calls

from sgtrace.tracer.load import load_trace
from sgtrace.tracer.merge import render_chrome_trace

CALLS: list[Call] = [
    (2, "step", {"batch_size": 2, "forward_mode": "DECODE"}),
    (2, "decision", {"batch_size": 2, "spec_on": True, "changed": False, "reason": "low-load"}),
    (2, "verify", {"batch_size": 2, "draft_width": 4}),
]


def _meta(pid: int, rank: int) -> list[dict[str, object]]:
    return [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
         "args": {"name": f"rank {rank} (pid {pid})"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
         "args": {"sort_index": rank}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": rank,
         "args": {"name": f"rank {rank}"}},
    ]  # fmt: skip


def _calls(pid: int, rank: int, *, has_verify: bool) -> list[dict[str, object]]:
    """run_batch lasts until the last call of its step (see write_calls)."""
    step = {
        "ph": "X",
        "name": "Scheduler.run_batch",
        "cat": "step",
        "pid": pid,
        "tid": rank,
        "ts": 0.0,
        "dur": 2.5 if has_verify else 1.5,
        "args": {
            "function": "fakeserve.scheduler:Scheduler.run_batch",
            "step": 2,
            "batch_size": 2,
            "forward_mode": "DECODE",
        },
    }
    decision = {
        "ph": "X",
        "name": "DecisionLog.record",
        "cat": "decision",
        "pid": pid,
        "tid": rank,
        "ts": 1.0,
        "dur": 0.5,
        "args": {
            "function": "sgtrace_payload.record:DecisionLog.record",
            "step": 2,
            "batch_size": 2,
            "spec_on": True,
            "changed": False,
            "reason": "low-load",
        },
    }
    counters = [
        {
            "ph": "C",
            "pid": pid,
            "tid": rank,
            "ts": 1.0,
            "name": "batch size",
            "args": {"requests": 2},
        },
        {
            "ph": "C",
            "pid": pid,
            "tid": rank,
            "ts": 1.0,
            "name": "speculation on",
            "args": {"on": 1},
        },
    ]
    verify = {
        "ph": "X",
        "name": "SpecWorker.verify",
        "cat": "verify",
        "pid": pid,
        "tid": rank,
        "ts": 2.0,
        "dur": 0.5,
        "args": {
            "function": "fakeserve.workers:SpecWorker.verify",
            "step": 2,
            "batch_size": 2,
            "draft_width": 4,
        },
    }
    return [step, decision, *counters] + ([verify] if has_verify else [])  # fmt: skip


def test_two_ranks_merge_into_one_sorted_chrome_trace(tmp_path: Path) -> None:
    trace = load_trace(write_calls(tmp_path, {0: CALLS, 1: CALLS[:2]}))
    expected = {
        "traceEvents": _meta(100, 0)
        + _meta(101, 1)
        + _calls(100, 0, has_verify=True)
        + _calls(101, 1, has_verify=False),
        "displayTimeUnit": "ms",
        "otherData": {"generator": "sgtrace", "processes": 2},
    }
    assert render_chrome_trace(trace) == expected


def test_the_merged_file_of_a_recorded_run_holds_every_call(recorded: Callable[..., Path]) -> None:
    trace_dir = recorded()
    trace = load_trace(trace_dir)
    data = json.loads((trace_dir / "trace.json").read_text())
    calls = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert len(calls) == len(trace.events)
    assert {(e["pid"], e["tid"]) for e in calls} == {(e.pid, e.rank) for e in trace.events}
    assert min(e["ts"] for e in calls) == 0.0
    assert all(e["dur"] >= 0 for e in calls)
    counters = [e for e in data["traceEvents"] if e["ph"] == "C"]
    assert len(counters) == 2 * 10  # batch size and speculation, per decision
