"""bench/live/sweep.sh run whole, by bash, on this machine, from a sweep plan (sweep_harness.py:
stand-in servers and model builder; the rest is real). What depends on the host's timing (the
monitors finding the busy server thread) is checked by bench/checks, not here."""

from __future__ import annotations

import json
import os
import re
import shutil
import tarfile
from pathlib import Path

import pytest
from tests.bench.sweep_harness import ROOT, STAND_IN_LIMITS_AND_PATHS, TURNS_PLAN, run_sweep
from tests.bench.test_live_sweep import script

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def test_servers_take_turns_at_each_level(tmp_path):
    done, out = run_sweep(tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = [json.loads(line) for line in (out / "sweep.jsonl").read_text().splitlines()]
    levels = [(r["concurrency"], r["rep"], r["label"]) for r in lines if "concurrency" in r]
    assert levels == [
        (2, 1, "base"),
        (2, 1, "base+aa"),
        (2, 1, "eagle3-high"),
        (2, 2, "base+aa"),
        (2, 2, "eagle3-high"),
        (2, 2, "base"),
        (8, 1, "base"),
        (8, 1, "base+aa"),
        (8, 1, "eagle3-high"),
        (8, 2, "base+aa"),
        (8, 2, "eagle3-high"),
        (8, 2, "base"),
    ]
    assert all(r["errors"] == 0 and r["tok_per_s"] > 0 for r in lines if "concurrency" in r)
    # every server answered the greedy prompts as the synthetic target would (x+1)
    greedy = [json.loads(line) for line in (out / "greedy.jsonl").read_text().splitlines()]
    assert len(greedy) == 3 * 2 * 16 and all(g["expected"] for g in greedy)
    # the servers were stopped: their process groups are gone
    for name in ("base", "base+aa", "eagle3-high"):
        pid = int(Path(f"/tmp/server-{name}.pid").read_text())
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)
    # each server compiled into a Triton cache of its own, seeded from the shared one; the
    # shared one comes back with every server's compiles merged in, the servers' own left out
    logs = {
        n: (tmp_path / "logs" / f"server_{n}.log").read_text()
        for n in ("base", "base+aa", "eagle3-high")
    }
    assert {
        n: f"triton cache: {tmp_path / 'jit' / f'triton-{n}'}" in text for n, text in logs.items()
    } == {n: True for n in logs}
    with tarfile.open(out / "jitcache.tgz") as tar:
        names = {Path(m.name).as_posix() for m in tar.getmembers() if m.isfile()}
    assert "triton/SHARED/kernel.cubin" in names
    assert len([n for n in names if n.startswith("triton/PORT")]) == 3
    assert not [n for n in names if n.startswith("triton-")]
    # the report pools a server's turns at a level: four windows each
    rows, _ = script("sweep_report").load([out])
    assert {(r["label"], r["concurrency"], len(r["window_tok_per_s"])) for r in rows} == {
        (label, c, 4) for label in ("base", "base+aa", "eagle3-high") for c in (2, 8)
    }
    # the A/A pair is paired over its two turns at each level: the run's noise floor
    floors = script("sweep_claims").aa_floors(rows)
    assert [(f.server, f.against, f.concurrency, f.paired.turns) for f in floors] == [
        ("base+aa", "base", 2, 2),
        ("base+aa", "base", 8, 2),
    ]
    # the monitors ran: monitor_report.py finds every turn of the sweep
    monitored, _ = script("monitor_report").report(out)
    assert [(m["c"], m["rep"], m["label"]) for m in monitored] == levels
    # each server's compiles are listed with their times (the stand-ins' two, at start-up:
    # none inside a turn)
    with tarfile.open(out / "servers.tgz") as tar:
        jit = {
            Path(m.name).name: tar.extractfile(m).read().decode()
            for m in tar.getmembers()
            if "jit-" in m.name
        }
    assert sorted(jit) == ["jit-base+aa.txt", "jit-base.txt", "jit-eagle3-high.txt"]
    for text in jit.values():
        kernels = sorted(line.split()[1] for line in text.splitlines())
        assert (
            len(kernels) == 2
            and kernels[0].startswith("PORT")
            and kernels[1] == "SHARED/kernel.cubin"
        )
    assert {m["jit"] for m in monitored} == {0}
    # run.log starts with the plan as resolved
    log = (out / "run.log").read_text()
    assert 'list = ["base", "base+aa", "eagle3:high"]' in log and "reps = 2" in log
    assert "LOW GPU MEMORY" not in log  # 18.12 GB left each: four servers on an 80 GB card
    # every front logs its long collections (host.gc_warning_s); no collector frozen unasked
    assert {n: "--gc-warning-threshold-secs 0.05 " in text for n, text in logs.items()} == {
        n: True for n in logs
    }
    assert "collector frozen" not in log


def test_a_plan_that_cannot_run_stops_before_anything_starts(tmp_path):
    done, out = run_sweep(tmp_path, "[servers]\nlist = ['base', 'eagle3:mid']\n")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [
        f"sweep_plan.py: {tmp_path / 'plan.toml'}: servers.list: 'eagle3:mid' needs a draft of "
        "models.accept (high, low), written eagle3:DRAFT",
        f"sweep.sh: the plan {tmp_path / 'plan.toml'} cannot run (above)",
    ]
    assert not (out / "sweep.jsonl").exists()


def test_sweep_sh_starts_every_kind_the_plan_accepts():
    """The kinds of sweep.sh's case statement are the plan schema's, no more, no fewer."""
    text = (ROOT / "bench" / "live" / "sweep.sh").read_text()
    block = text[text.index("case $kind in") : text.index("esac", text.index("case $kind in"))]
    in_script = {k for line in re.findall(r"^\s+([\w|]+)\)", block, re.M) for k in line.split("|")}
    kinds = set(script("sweep_plan").SERVER_KINDS)
    assert in_script | {"base", "eagle3"} == kinds


HELD_OFF_PLAN = (
    """\
[servers]
list = ["base", "base+aa", "hook:high", "plainoff:high", "cal:high"]

[load]
concurrency = [2]
warmup_s = 0.2
window_s = 0.3

[schedule]
reps = 1

[host]
monitor = false

"""
    + STAND_IN_LIMITS_AND_PATHS
)


def test_warm_up_turns_come_first_at_each_level_and_are_marked(tmp_path):
    """schedule.warmup_turns: a round of turns at each level before its reps, rep 0, marked
    "warmup" for the report to leave out."""
    plan = TURNS_PLAN.replace("reps = 2\n", "reps = 2\nwarmup_turns = 1\n")
    done, out = run_sweep(tmp_path, plan)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = [json.loads(line) for line in (out / "sweep.jsonl").read_text().splitlines()]
    turns = [(r["concurrency"], r["rep"], bool(r.get("warmup"))) for r in lines if "rep" in r]
    per_level = [(0, True)] * 3 + [(1, False)] * 3 + [(2, False)] * 3
    assert turns == [(c, rep, warm) for c in (2, 8) for rep, warm in per_level]
    rows, _ = script("sweep_report").load([out])
    assert {len(r["window_tok_per_s"]) for r in rows} == {4}  # two scored turns, two windows
    warm, _ = script("sweep_report").load([out], warmup=True)
    assert {len(r["window_tok_per_s"]) for r in warm} == {2}


def test_each_collector_is_frozen_after_its_greedy_check_where_the_plan_asks(tmp_path):
    """host.freeze_gc: SGLang's /freeze_gc on every server after its greedy prompts, before any
    turn, said in run.log; host.gc_warning_s = 0 leaves SGLang's long-collection log unasked
    (the default asks it: test_servers_take_turns_at_each_level)."""
    plan = TURNS_PLAN.replace("[limits]", "[host]\nfreeze_gc = true\ngc_warning_s = 0\n\n[limits]")
    done, out = run_sweep(tmp_path, plan)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    names = ("base", "base+aa", "eagle3-high")
    paths = {n: tmp_path / "logs" / f"server_{n}.log" for n in names}
    logs = {n: path.read_text() for n, path in paths.items()}
    # the greedy check: its 16 prompts one at a time, then the 16 at once: 32 requests
    assert {n: re.findall(r"freeze_gc after (\d+) requests", t) for n, t in logs.items()} == {
        n: ["32"] for n in names
    }
    assert not [n for n, path in paths.items() if "--gc-warning-threshold-secs" in launch(path)[0]]
    run_log = (out / "run.log").read_text()
    frozen = [
        run_log.index(f"{n}: collector frozen: 200 Garbage collection frozen.") for n in names
    ]
    assert max(frozen) < run_log.index("== turns at each level")


def test_an_sglang_without_the_collection_warning_starts_without_it(tmp_path):
    """host.gc_warning_s on an SGLang whose arguments lack --gc-warning-threshold-secs: the
    servers start without the flag (it would stop them), and run.log says so."""
    done, out = run_sweep(tmp_path, gc_warning=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "--gc-warning-threshold-secs" not in launch(tmp_path / "logs" / "server_base.log")[0]
    assert "this SGLang has no --gc-warning-threshold-secs" in (out / "run.log").read_text()


def launch(log: Path) -> tuple[str, str]:
    """A stand-in server's command line and PYTHONPATH, from its log (sweep_harness.PYTHON3)."""
    lines = log.read_text().splitlines()
    args = next(x for x in lines if x.startswith("args: "))
    return args.removeprefix("args: "), next(x for x in lines if x.startswith("pythonpath: "))


def test_the_held_off_servers_start_with_their_own_hook_directory(tmp_path):
    for name in ("hook", "plainoff", "cal"):  # what prepare_sweep.py writes
        (tmp_path / "carry" / name).mkdir(parents=True)
    done, out = run_sweep(tmp_path, HELD_OFF_PLAN)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    names = ("base", "plainoff-high", "hook-high", "cal-high")
    got = {n: launch(tmp_path / "logs" / f"server_{n}.log") for n in names}
    site = tmp_path / "site"
    assert {n: path for n, (_, path) in got.items()} == {
        "base": f"pythonpath: {site}",
        "plainoff-high": f"pythonpath: {tmp_path / 'carry' / 'plainoff'}:{site}",
        "hook-high": f"pythonpath: {tmp_path / 'carry' / 'hook'}:{site}",
        "cal-high": f"pythonpath: {tmp_path / 'carry' / 'cal'}:{site}",
    }
    # plainoff and cal start as the hook does, their ports aside: EAGLE-3 with the plan's draft
    args = {n: re.sub(r" --port \d+", "", a) for n, (a, _) in got.items()}
    assert args["plainoff-high"] == args["hook-high"] == args["cal-high"]
    assert args["plainoff-high"].startswith(args["base"] + " --speculative-algorithm EAGLE3 ")
    assert args["plainoff-high"].endswith("/synth/draft-high")
    rows, _ = script("sweep_report").load([out])
    assert {(r["label"], r["kind"], r["draft"]) for r in rows} == {
        ("base", "base", ""),
        ("base+aa", "base", ""),
        ("hook-high", "hook", "high"),
        ("plainoff-high", "plainoff", "high"),
        ("cal-high", "cal", "high"),
    }


def test_a_held_off_server_without_its_directory_stops_the_sweep(tmp_path):
    (tmp_path / "carry" / "hook").mkdir(parents=True)
    done, out = run_sweep(tmp_path, HELD_OFF_PLAN)
    assert done.returncode == 2
    assert done.stdout.splitlines()[-1].endswith(
        f"MISSING {tmp_path / 'carry' / 'plainoff'}: run bench/live/prepare_sweep.py"
    )
    assert not (out / "sweep.jsonl").exists()


def test_a_fixed_work_plan_reaches_the_load_generator(tmp_path):
    done, out = run_sweep(tmp_path, TURNS_FIXED)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [json.loads(line) for line in (out / "sweep.jsonl").read_text().splitlines()]
    turns = [r for r in rows if "concurrency" in r]
    assert len(turns) == 2 * 2 * 2  # two servers, two levels, two turns
    for r in turns:  # the plan's fixed work, not windows: 3 requests a worker of 20 tokens
        assert r["mode"] == "fixed" and r["fixed_requests"] == 3 and r["errors"] == 0
        assert r["tokens"] == 3 * 20 * r["concurrency"] and r["fixed_batch"] is False
    (tmp_path / "batch").mkdir()
    done, out = run_sweep(
        tmp_path / "batch", TURNS_FIXED.replace("max_new = 20", "max_new = 20\nfixed_batch = true")
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [json.loads(line) for line in (out / "sweep.jsonl").read_text().splitlines()]
    assert all(r["fixed_batch"] for r in rows if "concurrency" in r)


TURNS_FIXED = (
    """\
[servers]
list = ["base", "base+aa"]

[load]
concurrency = [1, 4]
fixed_requests = 3
max_new = 20

[schedule]
reps = 2

[host]
monitor = false

"""
    + STAND_IN_LIMITS_AND_PATHS
)


def test_the_servers_archive_holds_this_calls_logs_only(tmp_path):
    """A warm device machine keeps the earlier calls' server logs in the plan's logs folder;
    each call's servers.tgz holds what it wrote (calls 49-53 each held every earlier one)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    stale = logs / "server_hook-old.log"
    stale.write_text("an earlier call's server\n")
    hour_ago = stale.stat().st_mtime - 3600
    os.utime(stale, (hour_ago, hour_ago))
    # the monitors' files of the earlier call (appended to, they were kept whole: calls 61-65)
    (logs / "pgids.txt").write_text("hook-old 999999\n")
    (logs / "host.jsonl").write_text('{"t": 1.0, "cpus": {}, "threads": []}\n')
    done, out = run_sweep(tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    with tarfile.open(out / "servers.tgz") as archive:
        names = {Path(name).name for name in archive.getnames()}
        pgids = archive.extractfile(next(m for m in archive if m.name.endswith("pgids.txt")))
        labels = [line.split()[0] for line in pgids.read().decode().splitlines()]
        host = archive.extractfile(next(m for m in archive if m.name.endswith("host.jsonl")))
        first = json.loads(host.readline())
    assert "server_hook-old.log" not in names
    assert {"server_base.log", "server_base+aa.log", "server_eagle3-high.log"} <= names
    assert labels == ["base", "base+aa", "eagle3-high"] and first["t"] > 1.0


def test_a_server_left_little_gpu_memory_is_said_in_the_log(tmp_path, monkeypatch):
    """Five servers on an 80 GB card left 3.1 GB each after start-up; the A/A replica died at its
    first wave of 128 (call 61), and only the report's failed turns said so afterwards."""
    monkeypatch.setenv("FAKE_GPU_MEM_GB", "3.09")
    done, out = run_sweep(tmp_path, TURNS_FIXED)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    log = (out / "run.log").read_text()
    for name in ("base", "base+aa"):
        assert f"LOW GPU MEMORY {name}: 3.09 GB left after start-up (under 8)" in log
