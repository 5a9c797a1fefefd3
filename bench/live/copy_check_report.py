#!/usr/bin/env python3
"""The verdict of copy_check.sh: exact outputs, KV back to zero, switches, faults, re-entry.

    copy_check_report.py --results copy.jsonl --logs LOGDIR --traces HOOKDIRS --out OUT

Per server: the phases copy_check.py ran (requests, exact, aborted, mismatches, errors, KV
tokens in use once idle), and from its log: the hook's switches, SGLang's retractions, lines
that name a traceback or a leak. Re-entry, from the tracer's decision records of each traced
hook directory: the accept length by position in each stretch of speculative decode results
(0-31, 32-127, 128+ after switching on). Writes OUT/copy_check.json and OUT/copy_check.md.
Stdlib only.
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
BUCKETS = ((0, 32), (32, 128), (128, 1 << 30))
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


def stretches(events: list[dict]) -> list[list[float]]:
    """The accept lengths of each run of speculative decode results (a plain result has
    none), in step order."""
    runs: list[list[float]] = []
    current: list[float] | None = None
    for facts in sorted(events, key=lambda f: f["hook_step"]):
        length = facts.get("accept_length")
        if length is None:
            current = None
            continue
        if current is None:
            current = []
            runs.append(current)
        current.append(float(length))
    return runs


def reentry(trace_dir: Path) -> dict | None:
    events = []
    for path in trace_dir.glob("events-*.jsonl"):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if '"role":"decision"' in line or '"role": "decision"' in line:
                record = json.loads(line)
                if record.get("type") == "call" and "facts" in record:
                    events.append(record["facts"])
    if not events:
        return None
    runs = stretches(events)
    full = runs[1:-1]  # the first began at start-up, the last was cut by the end
    by_bucket: dict[str, list[float]] = defaultdict(list)
    for run in full:
        for k, length in enumerate(run):
            for lo, hi in BUCKETS:
                if lo <= k < hi:
                    by_bucket[f"{lo}-{hi - 1 if hi < 1 << 30 else ''}"].append(length)
    return {
        "decisions": len(events),
        "stretches_on": len(full),
        "stretch_lengths": [len(run) for run in full][:20],
        "accept_length_by_position": {
            key: {"mean": round(statistics.fmean(v), 3), "results": len(v)}
            for key, v in by_bucket.items()
        },
        "first_result_after_on": round(statistics.fmean(run[0] for run in full), 3)
        if full
        else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, required=True)
    p.add_argument("--logs", type=Path, required=True)
    p.add_argument("--traces", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
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
    for name, summary in report["reentry"].items():
        lines += ["", f"Re-entry ({name}): {json.dumps(summary)}"]
    report["all_ok"] = all(f["ok"] for f in report["servers"].values())
    lines += ["", f"all servers ok: {report['all_ok']}"]
    (a.out / "copy_check.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    (a.out / "copy_check.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
