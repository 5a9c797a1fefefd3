#!/usr/bin/env python3
"""Summarise the torch-profiler traces SGLang's /start_profile wrote: GPU time per kernel.

    profile_summary.py DIR --label NAME [--steps N]   # one JSON line on stdout

Reads every ``*.trace.json.gz`` / ``*.json`` under DIR, sums the durations of GPU kernel
events by kernel name, and prints the total, the share of the 15 largest, and the GPU time per
profiled step (``--steps``, the ``num_steps`` the profile was asked for). It also prints the
span from the first kernel's start to the last one's end, per step (``span_ms_per_step``: the
step period the server achieved), and the kernel time over that span (``gpu_busy``): well below
1, the GPU waited for the host between steps. Stdlib only.
"""

import argparse
import collections
import gzip
import json
from pathlib import Path


def events(path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        data = json.load(f)
    return data.get("traceEvents", data) if isinstance(data, dict) else data


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", type=Path)
    p.add_argument("--label", required=True)
    p.add_argument("--steps", type=int, default=20)
    a = p.parse_args()
    files = sorted(a.dir.rglob("*.json.gz")) + sorted(a.dir.rglob("*.json"))
    per_kernel = collections.Counter()
    starts, ends = [], []
    for path in files:
        for e in events(path):
            if isinstance(e, dict) and e.get("cat") in ("kernel", "gpu_memcpy") and "dur" in e:
                per_kernel[e["name"][:120]] += float(e["dur"])
                if "ts" in e:
                    starts.append(float(e["ts"]))
                    ends.append(float(e["ts"]) + float(e["dur"]))
    total = sum(per_kernel.values())
    span = max(ends) - min(starts) if starts else 0.0
    top = (
        [
            {"kernel": k, "ms": round(v / 1000, 3), "share": round(v / total, 4)}
            for k, v in per_kernel.most_common(15)
        ]
        if total
        else []
    )
    print(
        json.dumps(
            {
                "label": a.label,
                "files": [f.name for f in files],
                "gpu_ms_total": round(total / 1000, 3),
                "gpu_ms_per_step": round(total / 1000 / a.steps, 3) if total else None,
                "span_ms_per_step": round(span / 1000 / a.steps, 3) if span else None,
                "gpu_busy": round(total / span, 3) if span else None,
                "top_kernels": top,
            }
        )
    )


if __name__ == "__main__":
    main()
