"""What the live benchmark's host monitor measures, which depends on the host's timing.

A spinning thread is seen busy most of each interval, two spinners on one CPU slow each other,
and the monitors of a whole (stand-in) sweep find each measured server's busiest thread. Each
of these failed about one run in three on a loaded 2-core machine, so they are checks of the
benchmark's instruments (``nox -s bench``), not unit tests; the parsing they rely on is tested
in tests/bench/test_host_monitor.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.bench.sweep_harness import run_sweep
from tests.bench.test_live_sweep import script

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")


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


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_sweeps_monitors_find_each_measured_servers_busy_thread(tmp_path):
    done, out = run_sweep(tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    monitored, _ = script("monitor_report").report(out)
    assert monitored and all(m["samples"] >= 1 and m["top_busy"] is not None for m in monitored)
    assert any(m["top_busy"] > 0 and m["top_cpus"] for m in monitored)
