#!/usr/bin/env python3
"""The verdict of copy_check.sh: exact outputs, KV back to zero, switches, faults, re-entry.

    copy_check_report.py --results copy.jsonl --logs LOGDIR --traces HOOKDIRS --out OUT

Per server: the phases copy_check.py ran (requests, exact, aborted, mismatches, errors, KV
tokens in use once idle), and from its log: the hook's switches, SGLang's retractions, lines
that name a traceback or a leak. Re-entry, from the tracer's decision records of each traced
hook directory (``reentry``): the accept length by position in each stretch of speculative
decode results after switching on (0, 1-3, 4-31, 32-127, 128-), the steady state, the tokens
the re-entry loses, and the time from switching on to the first speculative result; with a
directory ``NAME`` and its catch-up twin ``NAMEc``, what the catch-up regained and cost. Writes
OUT/copy_check.json and OUT/copy_check.md. Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path

FAULTS = re.compile(r"Traceback|memory leak|leak detected|CUDA error|\bhung\b|watchdog", re.I)
# a traceback that is no fault: SGLang 0.5.13's optional Responses API, whose openai_harmony
# import fails in the probe carry (the server starts and serves /generate all the same)
NOT_FAULTS = re.compile(r"Can not initialize OpenAIServingResponses")
# positions after switching on (results counted from the first speculative one), and the
# position from which the accept length counts as steady
BUCKETS = ((0, 1), (1, 4), (4, 32), (32, 128), (128, None))
STEADY_FROM = 32
COMPARED = 128  # results after switching on where a catch-up twin's accept lengths are compared
HELD_ABORTED = re.compile(r"sgtrace-hook aborted (\d+) held requests")


def log_facts(path: Path) -> dict:
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    lines = [line for line in text.splitlines() if "server_args=" not in line]
    return {
        "switches": sum("sgtrace-hook switched" in line for line in lines),
        "plain_ready": any("plain off state ready" in line for line in lines),
        "memory_retractions": sum("KV cache pool is full. Retract" in line for line in lines),
        "forced_retractions": sum("Testing retraction." in line for line in lines),
        # aborts that reached requests held between a switch and their re-admission
        "held_aborted": sum(
            int(m.group(1)) for line in lines if (m := HELD_ABORTED.search(line)) is not None
        ),
        "faults": [
            line[:240] for line in lines if FAULTS.search(line) and not NOT_FAULTS.search(line)
        ][:8],
    }


def decisions(path: Path) -> list[dict]:
    """The hook's decision records in one tracer events file (one process), in step order:
    the step, the accept length (None: a plain result), whether it switched on, when (ns)."""
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if '"role":"decision"' in line or '"role": "decision"' in line:
            record = json.loads(line)
            if record.get("type") == "call" and "facts" in record:
                facts = record["facts"]
                records.append({
                    "step": facts["hook_step"],
                    "length": facts.get("accept_length"),
                    "switched_on": bool(facts.get("changed")) and bool(facts.get("spec_on")),
                    "t0": record.get("t0"),
                })  # fmt: skip
    return sorted(records, key=lambda r: r["step"])


def stretches(records: list[dict]) -> list[dict]:
    """Each run of speculative decode results (a plain result has no accept length): its
    accept lengths and result times in order, and the time from the decision that switched on
    before it (None: none did, the run began at start-up)."""
    runs: list[dict] = []
    current: dict | None = None
    switched_at = None
    for record in records:
        if record["length"] is None:
            current = None
            if record["switched_on"]:
                switched_at = record["t0"]
            continue
        if current is None:
            on_ns = (
                None if switched_at is None or record["t0"] is None else record["t0"] - switched_at
            )
            current = {"lengths": [], "t0": [], "on_ns": on_ns}
            runs.append(current)
            switched_at = None
        current["lengths"].append(float(record["length"]))
        current["t0"].append(record["t0"])
    return runs


def bucket_name(lo: int, hi: int | None) -> str:
    return f"{lo}-" if hi is None else (str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}")


def median_ms(values: list[int]) -> float | None:
    return round(statistics.median(values) / 1e6, 2) if values else None


def within(by_position: dict[int, list[float]], lo: int, hi: int | None) -> list[float]:
    """The accept lengths at positions ``lo`` to ``hi - 1`` (``hi`` None: to the end)."""
    return [x for k, v in by_position.items() if k >= lo and (hi is None or k < hi) for x in v]


def reentry(trace_dir: Path) -> dict | None:
    """Accept length by position after switching on, over the whole stretches of speculative
    results (each process's first began at start-up, its last was cut by the end), the steady
    state (positions ``STEADY_FROM`` on), the tokens a request loses to the re-entry (the sum
    over the positions before ``STEADY_FROM`` of steady minus that position's mean), and the
    time from the decision that switched on to the first speculative result beside the steady
    time between two results (ms, medians)."""
    full, count = [], 0
    for path in sorted(trace_dir.glob("events-*.jsonl")):
        records = decisions(path)
        count += len(records)
        full += stretches(records)[1:-1]
    if not count:
        return None
    by_position: dict[int, list[float]] = defaultdict(list)
    periods, on_ns = [], [run["on_ns"] for run in full if run["on_ns"] is not None]
    for run in full:
        for k, length in enumerate(run["lengths"]):
            by_position[k].append(length)
        times = run["t0"][STEADY_FROM:]
        periods += [b - a for a, b in zip(times, times[1:], strict=False) if None not in (a, b)]
    buckets = {
        bucket_name(lo, hi): {"mean": round(statistics.fmean(v), 3), "results": len(v)}
        for lo, hi in BUCKETS
        if (v := within(by_position, lo, hi))
    }
    steady = within(by_position, STEADY_FROM, None)
    steady_mean = statistics.fmean(steady) if steady else None
    lost = None
    if steady_mean is not None:
        early = [statistics.fmean(by_position[k]) for k in range(STEADY_FROM) if by_position[k]]
        lost = round(sum(steady_mean - mean for mean in early), 2)
    return {
        "decisions": count,
        "stretches_on": len(full),
        "stretch_lengths": [len(run["lengths"]) for run in full][:20],
        "accept_length_by_position": buckets,
        "steady_accept_length": None if steady_mean is None else round(steady_mean, 3),
        "tokens_lost_a_switch_on": lost,
        "first_result_after_on": (
            round(statistics.fmean(run["lengths"][0] for run in full), 3) if full else None
        ),
        "switch_on_to_first_result_ms": median_ms(on_ns),
        "steady_result_period_ms": median_ms(periods),
        "accept_length_at": [
            round(statistics.fmean(by_position[k]), 3) if by_position[k] else None
            for k in range(COMPARED)
        ],
    }


def reentry_lines(summaries: dict[str, dict]) -> list[str]:
    """The re-entry table, and what the catch-up changed where a directory ``NAME`` and its
    catch-up twin ``NAMEc`` were both traced: the sum over the first ``COMPARED`` positions of
    the twin's accept length minus this one's (stale draft KV can cost past the steady mark),
    and the time from switching on to the first speculative result."""
    if not summaries:
        return []
    names = [bucket_name(lo, hi) for lo, hi in BUCKETS]
    head = ["hook dir", "stretches", *names, "steady", "tokens lost a switch on",
            "switch on to first result, ms", "result period, ms"]  # fmt: skip
    lines = [
        "",
        f"Re-entry: accept length by decode result after switching on (steady: result "
        f"{STEADY_FROM} on; tokens lost: per request running at the switch)",
        "",
        "| " + " | ".join(head) + " |",
        "| --- |" + " ---: |" * (len(head) - 1),
    ]

    def cell(value) -> str:
        return "-" if value is None else str(value)

    for name, r in summaries.items():
        by = r["accept_length_by_position"]
        means = " | ".join(cell(by.get(b, {}).get("mean")) for b in names)
        lines.append(
            f"| {name} | {r['stretches_on']} | {means} | {cell(r['steady_accept_length'])} | "
            f"{cell(r['tokens_lost_a_switch_on'])} | {cell(r['switch_on_to_first_result_ms'])} | "
            f"{cell(r['steady_result_period_ms'])} |"
        )
    for name, r in summaries.items():
        twin = summaries.get(name + "c")
        if twin is None:
            continue
        parts = []
        pairs = [(x, y) for x, y in zip(r["accept_length_at"], twin["accept_length_at"], strict=True)
                 if x is not None and y is not None]  # fmt: skip
        if pairs:
            gain = sum(y - x for x, y in pairs)
            parts.append(
                f"{gain:.2f} tokens a request regained in the first {len(pairs)} results after "
                f"a switch on"
            )
        if (
            r["switch_on_to_first_result_ms"] is not None
            and twin["switch_on_to_first_result_ms"] is not None
        ):
            cost = twin["switch_on_to_first_result_ms"] - r["switch_on_to_first_result_ms"]
            parts.append(f"{cost:+.2f} ms from switch on to the first speculative result")
        if parts:
            lines += ["", f"The catch-up ({name}c against {name}): {'; '.join(parts)}."]
    return lines


def model_line(model: dict) -> str:
    """The copy model the servers ran, and what its lag draft's check predicts."""
    line = f"Copy model: {model.get('rule')}"
    lag, check = model.get("draft_lag"), model.get("draft_check") or {}
    if lag is None:
        return line + "; its draft reads no KV (a switch on costs it nothing)."
    steady = check.get("accept_length_checked")
    line += f"; the lag draft reads its own KV {lag} back (steady accept length {steady} predicted"
    if steady is not None:
        lost = lag * (steady - 1)
        line += f"; without the catch-up results 0-{lag - 1} at 1.0, {lost:.1f} tokens lost"
    return line + ")."


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, required=True)
    p.add_argument("--logs", type=Path, required=True)
    p.add_argument("--traces", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--model", type=Path, help="the copy model's models.json (make_copy_model.py)")
    a = p.parse_args()
    phases: dict[str, list[dict]] = defaultdict(list)
    if a.results.exists():
        for line in a.results.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                phases[record["label"]].append(record)
    servers = sorted({*phases, *(p.stem[len("server_") :] for p in a.logs.glob("server_*.log"))})
    report = {"servers": {}, "reentry": {}}
    rows = ["| server | phase | requests | exact | aborted | mismatches | errors | KV in use idle | ok |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]  # fmt: skip
    for name in servers:
        facts = log_facts(a.logs / f"server_{name}.log")
        ran = [r for r in phases.get(name, []) if r["phase"] != "start"]
        facts["phases"] = ran
        facts["ok"] = bool(ran) and all(r["ok"] for r in ran) and not facts["faults"]
        report["servers"][name] = facts
        for r in ran:
            rows.append(
                f"| {name} | {r['phase']} | {r['requests']} | {r['exact']} | {r['aborted']} | "
                f"{r.get('mismatch_count', 0)} | {len(r['errors'])} | {r['idle_kv_tokens']} | "
                f"{'yes' if r['ok'] else 'NO'} |"
            )
    for trace_dir in sorted(a.traces.glob("*")):
        summary = reentry(trace_dir) if trace_dir.is_dir() else None
        if summary is not None:
            report["reentry"][trace_dir.name] = summary
    lines = ["# Exact outputs on the copy model", "", *rows, "",
             "| server | switches | retractions for memory | forced retractions | held requests aborted | faults |",
             "| --- | ---: | ---: | ---: | ---: | --- |"]  # fmt: skip
    for name, facts in report["servers"].items():
        faults = "; ".join(facts["faults"]) or "none"
        lines.append(
            f"| {name} | {facts['switches']} | {facts['memory_retractions']} | "
            f"{facts['forced_retractions']} | {facts['held_aborted']} | {faults} |"
        )
    if a.model is not None and a.model.exists():
        report["model"] = json.loads(a.model.read_text(encoding="utf-8"))
        lines += ["", model_line(report["model"])]
    lines += reentry_lines(report["reentry"])
    report["all_ok"] = all(f["ok"] for f in report["servers"].values())
    lines += ["", f"all servers ok: {report['all_ok']}"]
    (a.out / "copy_check.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    (a.out / "copy_check.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
