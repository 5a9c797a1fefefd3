"""The live benchmark's host monitor (bench/live/host_monitor.py) on this machine's real /proc,
and monitor_report.py's reading of nvidia-smi's CSV."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from tests.bench.test_live_sweep import script

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")


def test_a_threads_stat_line_names_it_where_it_ran_and_its_group():
    mon = script("host_monitor")
    tid = threading.get_native_id()
    comm, cpu, ticks, group = mon.thread_stat(Path(f"/proc/self/task/{tid}/stat").read_text())
    assert comm == Path(f"/proc/self/task/{tid}/comm").read_text().strip()
    assert cpu in os.sched_getaffinity(0)
    assert group == os.getpgrp()
    assert ticks >= 0
    cpus = mon.cpu_times(Path("/proc/stat").read_text())
    assert set(os.sched_getaffinity(0)) <= set(cpus)
    assert all(0 <= busy <= total for busy, total in cpus.values())


def test_samples_find_a_busy_process_by_its_command_line(tmp_path):
    mon = script("host_monitor")
    spinner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nt = time.time()\nwhile time.time() - t < 5: pass",
            "spin_mark",
        ],
        start_new_session=True,
    )
    try:
        out = tmp_path / "host.jsonl"
        mon.sample(out, ["spin_mark"], 0.25, count=4)
    finally:
        spinner.kill()
        spinner.wait()
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 4
    seen = [t for line in lines for t in line["threads"]]
    assert seen and all(t[0] == spinner.pid and t[5] == spinner.pid for t in seen)
    assert max(t[4] for t in seen) > 0.5  # a spinning thread, busy most of each interval
    assert all(set(line["cpus"]) >= {str(t[3]) for t in line["threads"]} for line in lines)


def test_two_spinners_on_one_cpu_slow_each_other():
    mon = script("host_monitor")
    cpu = min(os.sched_getaffinity(0))
    alone = max(mon.rate_on([cpu], 0.2)[0] for _ in range(3))
    shared = mon.rate_on([cpu, cpu], 0.2)
    assert all(rate < 0.8 * alone for rate in shared)  # time-shared: about half each


def test_gpu_samples_read_nvidia_smi_csv_in_utc():
    report = script("monitor_report")
    text = (
        "timestamp, clocks.current.sm [MHz], clocks.current.memory [MHz], power.draw [W], "
        "temperature.gpu, utilization.gpu [%], clocks_event_reasons.active\n"
        "2026/12/03 08:36:36.250, 1980 MHz, 3201 MHz, 412.31 W, 41, 97 %, 0x0000000000000000\n"
        "2026/12/03 08:36:36.500, [N/A], 3201 MHz, 410.00 W, 41, 97 %, 0x0\n"
    )
    samples = report.gpu_samples(text)
    assert samples == [(1796286996.25, 1980.0, 412.31)]
