#!/usr/bin/env python3
"""What the host did while the live benchmark ran: CPU placement of the busy threads, per CPU.

    host_monitor.py topology --out F          # one JSON line: sysfs SMT siblings, and a probe
    host_monitor.py sample --out F [--match sglang,sweep_load] [--interval 0.25]

``topology`` records what sysfs says of each CPU (core id, thread siblings) and measures it:
two spinning processes pinned to CPUs i and j, every pair, and the rate of each against its
rate alone (``probe``: the CPUs whose co-runner slowed them below ``0.8``; on a VM whose host
puts two vCPUs on one physical core, those are siblings that sysfs may not show).

``sample`` runs until killed: every ``--interval`` seconds one JSON line with the wall time,
each CPU's busy fraction since the last sample (``/proc/stat``), and every thread of the
processes whose command line contains one of ``--match`` that was busy more than 5% of the
interval: ``[pid, tid, comm, cpu, busy, pgrp]`` (``cpu``: where it last ran; ``comm``: the
thread's name, SGLang titles its processes ``sglang::scheduler`` and so on; ``pgrp``: its process
group, one per server in sweep.sh). Stdlib only, Linux.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
BUSY_MIN = 0.05


def cpu_times(stat_text):
    """cpu index -> (busy ticks, total ticks) from the text of /proc/stat."""
    out = {}
    for line in stat_text.splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name != "cpu":
            ticks = [int(f) for f in fields[:8]]
            idle = ticks[3] + ticks[4]  # idle + iowait
            out[int(name[3:])] = (sum(ticks) - idle, sum(ticks))
    return out


def thread_stat(text):
    """(comm, cpu it last ran on, utime + stime ticks, process group) from the text of
    /proc/PID/task/TID/stat."""
    comm = text[text.index("(") + 1 : text.rindex(")")]
    rest = text[text.rindex(")") + 2 :].split()
    # rest[0] is field 3 (state): pgrp is field 5, utime and stime 14-15, processor 39
    return comm, int(rest[36]), int(rest[11]) + int(rest[12]), int(rest[2])


def matching_pids(proc, match):
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(m in cmd for m in match):
            yield int(entry.name)


def threads(proc, pids):
    """(pid, tid) -> (comm, cpu, ticks) of every thread of ``pids`` still alive."""
    out = {}
    for pid in pids:
        try:
            tids = [int(t.name) for t in (proc / str(pid) / "task").iterdir()]
        except OSError:
            continue
        for tid in tids:
            try:
                out[pid, tid] = thread_stat(
                    (proc / str(pid) / "task" / str(tid) / "stat").read_text()
                )
            except (OSError, ValueError, IndexError):
                continue
    return out


def sample(out, match, interval, proc=Path("/proc"), count=None):
    """Write one line per interval until killed (or ``count`` lines)."""
    prev_cpu = cpu_times((proc / "stat").read_text())
    prev_thr = threads(proc, list(matching_pids(proc, match)))
    prev_t = time.monotonic()
    written = 0
    with open(out, "a") as f:
        while count is None or written < count:
            time.sleep(interval)
            now_t = time.monotonic()
            cpu = cpu_times((proc / "stat").read_text())
            thr = threads(proc, list(matching_pids(proc, match)))
            span = (now_t - prev_t) * TICK
            busy_cpu = {
                c: round((b - prev_cpu[c][0]) / max(1, t - prev_cpu[c][1]), 3)
                for c, (b, t) in cpu.items()
                if c in prev_cpu
            }
            busy_thr = []
            for key, (comm, where, ticks, group) in thr.items():
                if key in prev_thr:
                    frac = (ticks - prev_thr[key][2]) / span if span else 0.0
                    if frac > BUSY_MIN:
                        busy_thr.append([*key, comm, where, round(frac, 3), group])
            f.write(
                json.dumps({"t": round(time.time(), 3), "cpus": busy_cpu, "threads": busy_thr})
                + "\n"
            )
            f.flush()
            written += 1
            prev_cpu, prev_thr, prev_t = cpu, thr, now_t


def spin(seconds):
    n, stop = 0, time.perf_counter() + seconds
    while time.perf_counter() < stop:
        n += 1
    return n / seconds


def rate_on(cpus, seconds):
    """The spinning rate on each CPU of ``cpus``, all of them spinning at once (one process each)."""
    reads = []
    for cpu in cpus:
        r, w = os.pipe()
        if os.fork() == 0:
            os.close(r)
            os.sched_setaffinity(0, {cpu})
            os.write(w, f"{spin(seconds)}".encode())
            os._exit(0)
        os.close(w)
        reads.append(r)
    rates = []
    for r in reads:
        with os.fdopen(r) as f:
            rates.append(float(f.read()))
    for _ in cpus:
        os.wait()
    return rates


def probe(cpus, seconds=0.1, slow=0.8):
    """{cpu: [cpus whose spinning slowed it below ``slow`` of its rate alone (best of 3)]}."""
    alone = {c: max(rate_on([c], seconds)[0] for _ in range(3)) for c in cpus}
    hit = {c: [] for c in cpus}
    for i, j in itertools.combinations(cpus, 2):
        ri, rj = rate_on([i, j], seconds)
        if ri < slow * alone[i] or rj < slow * alone[j]:
            hit[i].append(j)
            hit[j].append(i)
    return {"alone": {c: round(v) for c, v in alone.items()}, "slowed_by": hit}


def topology(sysfs=Path("/sys/devices/system/cpu"), probe_s=0.1):
    cpus = sorted(os.sched_getaffinity(0))
    info = {}
    for c in cpus:
        top = sysfs / f"cpu{c}" / "topology"
        info[c] = {
            name: (top / name).read_text().strip() if (top / name).exists() else None
            for name in ("core_id", "physical_package_id", "thread_siblings_list")
        }
    return {"cpus": cpus, "sysfs": info, "probe": probe(cpus, probe_s) if probe_s else None}


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("mode", choices=("topology", "sample"))
    p.add_argument("--out", required=True)
    p.add_argument(
        "--match", default="sglang,sweep_load", help="comma-separated command-line marks"
    )
    p.add_argument("--interval", type=float, default=0.25)
    p.add_argument("--count", type=int, default=None, help="stop after this many samples")
    p.add_argument("--probe-s", type=float, default=0.1, help="seconds per probe run (0: no probe)")
    a = p.parse_args(argv)
    if a.mode == "topology":
        with open(a.out, "a") as f:
            f.write(json.dumps(topology(probe_s=a.probe_s)) + "\n")
    else:
        sample(a.out, [m for m in a.match.split(",") if m], a.interval, count=a.count)


if __name__ == "__main__":
    main()
