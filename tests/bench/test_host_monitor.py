"""The live benchmark's host monitor (bench/live/host_monitor.py) reading this machine's real
/proc, and monitor_report.py's reading of nvidia-smi's CSV. What depends on the host's timing
(a spinning thread seen busy, two spinners slowing each other) is checked by
bench/checks/test_host_timing.py (``nox -s bench``): on a loaded 2-core machine it fails now and
then."""

from __future__ import annotations

import os
import statistics
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


def test_a_fixed_work_calls_turns_are_joined_over_their_work():
    """Call 54 (fixed work: no windows, a turn's work ends its wall time): every turn of every
    server gets its GPU clock and its scheduler thread's samples (a sample every 0.25 s, the
    turns' work 0.4 s and more)."""
    report = script("monitor_report")
    rows, _ = report.report(Path(__file__).parents[2] / "bench/results/live/sweep/call54")
    assert len(rows) == 4 * 4 * 10  # servers x levels x turns (a warm-up turn each)
    assert {r["label"] for r in rows} == {"base", "eagle3-a34", "eagle3-a34+aa", "hook-a34"}
    assert all(r["sm_mhz"] and r["power_w"] for r in rows)
    assert all(r["top_busy"] is not None for r in rows)


def test_the_front_process_burst_is_what_made_a_slow_turn():
    """Call 63, the good draft's one length at 128: the hook's turn at 0.69 of its others (rep
    7) is the one turn in which its front process (the process group's leader: SGLang's HTTP
    server and tokenizer) ran 0.4-0.5 s of CPU while the scheduler waited; in every other turn
    of every server there it ran under 0.1 s. The same burst made base servers' slow turns."""
    report = script("monitor_report")
    sweep = Path(__file__).parents[2] / "bench/results/live/sweep"
    rows, _ = report.report(sweep / "call63")
    slow = [r for r in rows if r["front_s"] >= 0.3]
    assert [(r["label"], r["rep"]) for r in slow] == [("hook-a34", 7)]
    assert all(r["front_s"] < 0.1 for r in rows if r not in slow)
    hook = [r["tok_per_s"] for r in rows if r["label"] == "hook-a34" and r["rep"] != 7]
    assert slow[0]["tok_per_s"] < 0.75 * statistics.median(hook)
    # a base server's slow turn at 128, no hook there: the same burst (call 42, rep 5)
    base = [r for r in report.report(sweep / "call42")[0] if r["label"] == "base"]
    worst = min((r for r in base if r["c"] == 128), key=lambda r: r["tok_per_s"])
    assert (worst["rep"], worst["front_s"] >= 0.3) == (5, True)


def test_a_turn_counts_the_kernels_its_server_compiled_in_it():
    """sweep.sh lists when each server wrote a compiled Triton kernel (``jit-LABEL.txt``): a
    turn counts those written during its work (call 69's hook at rep 4 met one, 80 ms more than
    its twin); a run without the lists says nothing (None), not zero."""
    report = script("monitor_report")
    files = {"jit-hook-a34.txt": "100.5 A/k.cubin\n103.0 B/k.cubin\n", "host.jsonl": ""}
    compiled = report.compile_times(files)
    assert compiled == {"hook-a34": [100.5, 103.0]}
    row = {"label": "hook-a34", "concurrency": 8, "rep": 4, "tok_per_s": 2298.7, "mode": "fixed",
           "t_start": 100.0, "wall_s": 0.6, "work_s": 0.5}  # fmt: skip
    assert report.turn_row(row, [], [], 1, {}, 0.25, compiled["hook-a34"])["jit"] == 1
    assert report.turn_row(row, [], [], 1, {}, 0.25, [103.0])["jit"] == 0
    assert report.turn_row(row, [], [], 1, {}, 0.25)["jit"] is None
