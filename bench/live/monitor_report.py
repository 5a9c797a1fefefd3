#!/usr/bin/env python3
"""Join a sweep.sh run's monitors (MONITOR=1) to its turns: what the host and GPU did in each.

    monitor_report.py RUN_DIR [--md FILE]

RUN_DIR holds ``sweep.jsonl`` (rows with ``t_start``; or ``sweep.jsonl.gz``) and ``servers.tgz`` (``host.jsonl``,
``gpu.csv``, ``pgids.txt``, ``topology.jsonl`` of host_monitor.py and nvidia-smi). For each
measured turn (its windows, after the warm-up) one row: tokens/s, the GPU's mean SM clock and
power, and the measured server's busiest thread (its scheduler, in practice): how busy it was,
on which CPUs it ran, and in how many samples another busy thread (> 30%) ran on the same CPU
or on one the CPU probe found slowing it (``shared``); and the CPU seconds of the server's front
process (``front_s``: its process group's leader, SGLang's HTTP server and tokenizer, which
hands each wave to the scheduler and each answer back: a burst of 0.4-0.5 s there, the
scheduler idle meanwhile, made the slow turns of 0.67-0.75 at 128 requests, base servers' and
the hook's alike, calls 38-63); and the Triton kernels the server compiled in the turn
(``jit``: sweep.sh's ``jit-LABEL.txt``, the times its own cache's binaries were written; 50-200
ms each, the slow turns of calls 54, 69 and 70; empty for calls before it). A per-server
summary follows: the Pearson correlation over its turns between tokens/s and each of those,
every quantity taken as its deviation from the mean of its level (so that levels pool).
Stdlib only.
"""

from __future__ import annotations

import argparse
import collections
import csv
import datetime as dt
import io
import itertools
import json
import statistics
import tarfile
from pathlib import Path

from stored_results import read_lines

BUSY_OTHER = 0.3


def members(tgz):
    """name (without folders) -> text of the monitor files in servers.tgz."""
    out = {}
    with tarfile.open(tgz) as tar:
        for m in tar.getmembers():
            name = Path(m.name).name
            wanted = name in ("host.jsonl", "gpu.csv", "pgids.txt", "topology.jsonl")
            if m.isfile() and (wanted or jit_label(name)):
                out[name] = tar.extractfile(m).read().decode()
    return out


def gpu_samples(text):
    """[(unix time, sm MHz, power W)] from nvidia-smi's CSV (timestamps in UTC)."""
    out = []
    for row in csv.reader(io.StringIO(text)):
        if not row or row[0].startswith("timestamp"):
            continue
        try:
            when = dt.datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f")
            sm = float(row[1].split()[0])
            power = float(row[3].split()[0])
        except (ValueError, IndexError):
            continue
        out.append((when.replace(tzinfo=dt.timezone.utc).timestamp(), sm, power))
    return out


def siblings(topology_text):
    """cpu -> CPUs that slow it (the probe), plus sysfs's thread siblings."""
    out = collections.defaultdict(set)
    for line in topology_text.splitlines():
        topo = json.loads(line)
        for cpu, info in topo.get("sysfs", {}).items():
            for part in (info.get("thread_siblings_list") or "").split(","):
                lo, _, hi = part.partition("-")
                if lo.isdigit():
                    out[int(cpu)].update(range(int(lo), int(hi or lo) + 1))
        for cpu, hits in ((topo.get("probe") or {}).get("slowed_by") or {}).items():
            out[int(cpu)].update(hits)
    for cpu, near in out.items():
        near.discard(cpu)
    return out


def mean(xs):
    return statistics.fmean(xs) if xs else None


def jit_label(name):
    """The server a ``jit-LABEL.txt`` file is of; None for any other file."""
    if name.startswith("jit-") and name.endswith(".txt"):
        return name[len("jit-") : -len(".txt")]
    return None


def compile_times(files):
    """label -> [unix time of each Triton binary its server wrote] from sweep.sh's
    ``jit-LABEL.txt`` lines (``TIME NAME``); no entry for a run without them."""
    return {
        jit_label(name): [float(line.split()[0]) for line in text.splitlines() if line.strip()]
        for name, text in files.items()
        if jit_label(name)
    }


def turn_row(row, host, gpu, group, near, period, compiled=None):
    """One measured turn's row; ``period``: the seconds between two host samples;
    ``compiled``: the times the server wrote a compiled kernel (None: not recorded)."""
    if row.get("mode") == "fixed":  # fixed work: the work's span ends the turn's wall time
        hi = row["t_start"] + row["wall_s"]
        lo = hi - row["work_s"]
    else:
        lo = row["t_start"] + row["warmup_s"]
        hi = lo + row["windows"] * row["window_s"]
    samples = [s for s in host if lo <= s["t"] <= hi]
    mine = collections.defaultdict(list)  # tid -> [(busy, cpu)]
    for s in samples:
        for _pid, tid, _comm, cpu, busy, pgrp in s["threads"]:
            if pgrp == group:
                mine[tid].append((busy, cpu))
    top = max(mine, key=lambda t: sum(b for b, _ in mine[t]), default=None)
    shared = 0
    cpus = collections.Counter()
    for s in samples:
        cpu = next((c for _p, tid, _c, c, _b, _g in s["threads"] if tid == top), None)
        if cpu is None:
            continue
        cpus[cpu] += 1
        if any(
            tid != top and busy > BUSY_OTHER and (c == cpu or c in near.get(cpu, ()))
            for _p, tid, _c, c, busy, _g in s["threads"]
        ):
            shared += 1
    front = sum(b for s in samples for p, _t, _c, _cpu, b, g in s["threads"] if p == g == group)
    in_gpu = [g for g in gpu if lo <= g[0] <= hi]
    busy = [b for b, _ in mine[top]] if top is not None else []
    return {
        "label": row["label"],
        "c": row["concurrency"],
        "rep": row.get("rep", 1),
        "tok_per_s": row["tok_per_s"],
        "sm_mhz": round(mean([g[1] for g in in_gpu]), 0) if in_gpu else None,
        "power_w": round(mean([g[2] for g in in_gpu]), 0) if in_gpu else None,
        "top_busy": round(sum(busy) / len(samples), 2) if samples else None,
        "top_cpus": ",".join(str(c) for c, _ in cpus.most_common(3)),
        "shared": round(shared / len(samples), 2) if samples else None,
        "front_s": round(front * period, 2) if samples else None,
        "jit": None if compiled is None else sum(lo <= t <= hi for t in compiled),
        "samples": len(samples),
    }


def pearson(xs, ys):
    pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if x is not None and y is not None]
    if len(pairs) < 3:
        return None
    try:
        return round(statistics.correlation(*zip(*pairs, strict=True)), 2)
    except statistics.StatisticsError:  # one side constant
        return None


def report(run):
    run = Path(run)
    files = members(run / "servers.tgz")
    missing = {"host.jsonl", "pgids.txt"} - set(files)
    if missing:
        raise SystemExit(
            f"{run}/servers.tgz has no {', '.join(sorted(missing))}: run sweep.sh with MONITOR=1"
        )
    host = [json.loads(line) for line in files["host.jsonl"].splitlines() if line.strip()]
    gpu = gpu_samples(files.get("gpu.csv", ""))
    groups = {}
    for line in files["pgids.txt"].splitlines():
        label, _, pid = line.partition(" ")
        if pid.strip().isdigit():
            groups[label] = int(pid)
    near = siblings(files.get("topology.jsonl", ""))
    compiled = compile_times(files)
    times = [s["t"] for s in host]
    period = statistics.median(b - a for a, b in itertools.pairwise(times)) if len(times) > 1 else 0
    rows = []
    for line in read_lines(run / "sweep.jsonl"):
        row = json.loads(line)
        if "t_start" in row and row["label"] in groups:
            label = row["label"]
            rows.append(turn_row(row, host, gpu, groups[label], near, period, compiled.get(label)))
    return rows, near


def correlations(rows):
    """label -> (turns, r with sm_mhz, top_busy, shared, front_s): each quantity taken as its
    deviation from the mean of its (server, level), so that levels pool."""
    groups = collections.defaultdict(list)
    for r in rows:
        groups[r["label"], r["c"]].append(r)
    devs = collections.defaultdict(list)
    for (label, _c), rs in groups.items():
        if len(rs) < 2:
            continue
        centre = {
            k: mean([r[k] for r in rs if r[k] is not None])
            for k in ("tok_per_s", "sm_mhz", "top_busy", "shared", "front_s")
        }
        for r in rs:
            devs[label].append(
                {k: None if r[k] is None or centre[k] is None else r[k] - centre[k] for k in centre}
            )
    out = {}
    for label, ds in sorted(devs.items()):
        tok = [d["tok_per_s"] for d in ds]
        out[label] = (
            len(ds),
            *(
                pearson(tok, [d[k] for d in ds])
                for k in ("sm_mhz", "top_busy", "shared", "front_s")
            ),
        )
    return out


def markdown(rows, near):
    keys = ["label", "c", "rep", "tok_per_s", "sm_mhz", "power_w", "top_busy", "top_cpus"]
    keys += ["shared", "front_s", "jit"]
    lines = ["| " + " | ".join(keys) + " |", "|" + " --- |" * len(keys)]
    lines += [
        "| " + " | ".join("" if r[k] is None else str(r[k]) for k in keys) + " |" for r in rows
    ]
    lines += ["", "| server | turns | r(tok/s, sm_mhz) | r(tok/s, top_busy) | r(tok/s, shared) "
              "| r(tok/s, front_s) |"]  # fmt: skip
    lines.append("|" + " --- |" * 6)
    for label, corr in correlations(rows).items():
        lines.append(f"| {label} | " + " | ".join("" if x is None else str(x) for x in corr) + " |")
    pairs = sorted({tuple(sorted((c, n))) for c, ns in near.items() for n in ns})
    lines += ["", f"CPUs that slow each other (probe, sysfs): {pairs or 'none'}"]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("run")
    p.add_argument("--md", help="write the tables here too")
    a = p.parse_args(argv)
    rows, near = report(a.run)
    text = markdown(rows, near)
    print(text, end="")
    if a.md:
        Path(a.md).write_text(text)


if __name__ == "__main__":
    main()
