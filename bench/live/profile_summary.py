#!/usr/bin/env python3
"""Summarise the torch-profiler traces SGLang's /start_profile wrote: GPU time per kernel.

    profile_summary.py DIR --label NAME [--steps N]   # one JSON line on stdout

Reads every ``*.trace.json.gz`` / ``*.json`` under DIR, sums the durations of GPU kernel
events by kernel name, and prints the total, the 15 largest (time, launches), and the GPU time
per profiled step (``--steps``, the ``num_steps`` the profile was asked for). It also prints the
span from the first kernel's start to the last one's end, per step (``span_ms_per_step``: the
step period the server achieved), and the kernel time over that span (``gpu_busy``): well below
1, the GPU waited for the host between steps.

A trace recorded with CPU activity (``"activities": ["CPU", "GPU"]``) also says who launched
each kernel: the innermost ``aten::`` op around its launch and, with ``with_stack``, the
innermost SGLang or sgtrace Python frame (``launched_by``), and it lists the host time spent
inside each such frame per step (``host_frames``: inclusive, on the busiest thread).
Stdlib only.
"""

import argparse
import collections
import json
from pathlib import Path

from stored_results import open_text

OWN_FRAMES = ("sglang/", "sgtrace_payload")  # the Python frames worth naming


def own(name):
    return any(mark in name for mark in OWN_FRAMES)


def events(path):
    with open_text(path) as f:  # *.json.gz decompressed
        data = json.load(f)
    return data.get("traceEvents", data) if isinstance(data, dict) else data


def launchers(evs):
    """correlation id -> (innermost aten op, innermost own Python frame) around each launch."""
    by_thread = collections.defaultdict(list)
    for e in evs:
        if e.get("ph") == "X" and "ts" in e and "dur" in e:
            by_thread[(e.get("pid"), e.get("tid"))].append(e)
    out = {}
    for thread in by_thread.values():
        thread.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
        stack = []  # open (end, kind, name)
        for e in thread:
            ts = float(e["ts"])
            while stack and stack[-1][0] < ts:
                stack.pop()
            cat, name = e.get("cat"), e.get("name", "")
            if cat == "cuda_runtime" and "correlation" in e.get("args", {}):
                op = next((n for _, k, n in reversed(stack) if k == "op"), None)
                frame = next((n for _, k, n in reversed(stack) if k == "frame"), None)
                out[e["args"]["correlation"]] = (op, frame)
            kind = "op" if cat == "cpu_op" else "frame" if cat == "python_function" else None
            if kind == "op" or (kind == "frame" and own(name)):
                stack.append((ts + float(e["dur"]), kind, name[:160]))
    return out


def host_frames(evs, steps):
    """Inclusive host ms per step of each own Python frame, on the thread with most frames."""
    frames = [e for e in evs if e.get("cat") == "python_function" and "dur" in e]
    if not frames:
        return []
    ((busiest, _),) = collections.Counter((e.get("pid"), e.get("tid")) for e in frames).most_common(
        1
    )
    total = collections.Counter()
    calls = collections.Counter()
    spans = collections.defaultdict(list)  # name -> [(start, end)] to skip recursive nesting
    for e in frames:
        name = e.get("name", "")
        if (e.get("pid"), e.get("tid")) != busiest or not own(name):
            continue
        spans[name].append((float(e["ts"]), float(e["ts"]) + float(e["dur"])))
    for name, ivs in spans.items():
        ivs.sort()
        end = -1.0
        for s, t in ivs:
            calls[name] += 1
            if s >= end:  # outermost occurrence only
                total[name] += t - s
                end = t
    return [
        {"frame": n, "ms_per_step": round(v / 1000 / steps, 3), "calls_per_step": calls[n] / steps}
        for n, v in total.most_common(40)
    ]


def summarise(files, label, steps):
    per_kernel = collections.Counter()
    count = collections.Counter()
    by = collections.defaultdict(collections.Counter)  # kernel -> Counter((op, frame) -> us)
    starts, ends, frames = [], [], []
    for path in files:
        evs = [e for e in events(path) if isinstance(e, dict)]
        who = launchers(evs)
        frames += host_frames(evs, steps)
        for e in evs:
            if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e:
                name = e["name"][:200]
                per_kernel[name] += float(e["dur"])
                count[name] += 1
                corr = e.get("args", {}).get("correlation")
                if corr in who:
                    by[name][who[corr]] += float(e["dur"])
                if "ts" in e:
                    starts.append(float(e["ts"]))
                    ends.append(float(e["ts"]) + float(e["dur"]))
    total = sum(per_kernel.values())
    span = max(ends) - min(starts) if starts else 0.0
    top = []
    for k, v in per_kernel.most_common(25 if by else 15):
        row = {"kernel": k, "ms": round(v / 1000, 3), "share": round(v / total, 4)}
        row["launches_per_step"] = round(count[k] / steps, 2)
        if k in by:
            (op, frame), _ = by[k].most_common(1)[0]
            row["launched_by"] = {"op": op, "frame": frame}
        top.append(row)
    return {
        "label": label,
        "files": [f.name for f in files],
        "with_cpu": bool(by),
        "gpu_ms_total": round(total / 1000, 3),
        "gpu_ms_per_step": round(total / 1000 / steps, 3) if total else None,
        "span_ms_per_step": round(span / 1000 / steps, 3) if span else None,
        "gpu_busy": round(total / span, 3) if span else None,
        "top_kernels": top,
        "host_frames": frames,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", type=Path)
    p.add_argument("--label", required=True)
    p.add_argument("--steps", type=int, default=20)
    a = p.parse_args()
    files = sorted(a.dir.rglob("*.json.gz")) + sorted(a.dir.rglob("*.json"))
    print(json.dumps(summarise(files, a.label, a.steps)))


if __name__ == "__main__":
    main()
