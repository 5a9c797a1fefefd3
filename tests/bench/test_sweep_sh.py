"""bench/live/sweep.sh run whole, by bash, on this machine: stand-in servers (fake_sglang.py)
take the place of SGLang and a python3 wrapper that of the model builder; the load generator,
the turns, the greedy check, the server lifecycle and the report are the real ones."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.bench.test_live_sweep import script

ROOT = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).with_name("fake_sglang.py")

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

PYTHON3 = """#!/usr/bin/env bash
# the device's python3, but for the model builder (the vocabulary only) and the server
case " $* " in
  *make_synth_models.py*) echo '{{"vocab": 32000}}'; exit 0 ;;
  *" -m sglang.launch_server "*)
    port=$(echo " $* " | sed -E 's/.* --port ([0-9]+) .*/\\1/')
    echo "args: $*"; echo "The server is fired up and ready to roll!"
    exec {python} {fake} "$port" 0.0005 ;;
esac
exec {python} "$@"
"""


def test_servers_take_turns_at_each_level(tmp_path):
    bin_dir, recipe, site, out = (tmp_path / d for d in ("bin", "recipe", "site", "out"))
    for d in (bin_dir, recipe, site):
        d.mkdir()
    (recipe / "site.tar.xz").write_bytes(b"")  # present; $SITE says it is unpacked already
    (site / ".ok").write_text("")
    wrapper = bin_dir / "python3"
    wrapper.write_text(PYTHON3.format(python=sys.executable, fake=FAKE))
    wrapper.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "OUT": str(out),
        "SITE": str(site),
        "RECIPE": str(recipe),
        "CARRY": str(tmp_path / "carry"),
        "LOGS": str(tmp_path / "logs"),
        "JITC": str(tmp_path / "jit"),
        "SERVERS": "base eagle3:high",
        "REPS": "2",
        "CONC": "2,8",
        "WARMUP_S": "0.2",
        "WINDOW_S": "0.3",
        "WINDOWS": "2",
        "DEADLINE_S": "200",
        "READY_TIMEOUT_S": "60",
    }
    done = subprocess.run(
        ["bash", "bench/live/sweep.sh"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = [json.loads(line) for line in (out / "sweep.jsonl").read_text().splitlines()]
    levels = [(r["concurrency"], r["rep"], r["label"]) for r in lines if "concurrency" in r]
    assert levels == [
        (2, 1, "base"),
        (2, 1, "eagle3-high"),
        (2, 2, "eagle3-high"),
        (2, 2, "base"),
        (8, 1, "base"),
        (8, 1, "eagle3-high"),
        (8, 2, "eagle3-high"),
        (8, 2, "base"),
    ]
    assert all(r["errors"] == 0 and r["tok_per_s"] > 0 for r in lines if "concurrency" in r)
    # every server answered the greedy prompts as the synthetic target would (x+1)
    greedy = [json.loads(line) for line in (out / "greedy.jsonl").read_text().splitlines()]
    assert len(greedy) == 2 * 2 * 16 and all(g["expected"] for g in greedy)
    # the servers were stopped: their process groups are gone
    for name in ("base", "eagle3-high"):
        pid = int(Path(f"/tmp/server-{name}.pid").read_text())
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)
    # the report pools a server's turns at a level: four windows each
    rows, _ = script("sweep_report").load([out])
    assert {(r["label"], r["concurrency"], len(r["window_tok_per_s"])) for r in rows} == {
        (label, c, 4) for label in ("base", "eagle3-high") for c in (2, 8)
    }
    # the monitors ran through the turns: each turn has host samples, and the measured
    # server's own busiest thread (its process group) is found in them
    monitored, _ = script("monitor_report").report(out)
    assert [(m["c"], m["rep"], m["label"]) for m in monitored] == levels
    assert all(m["samples"] >= 1 and m["top_busy"] is not None for m in monitored)
    assert any(m["top_busy"] > 0 and m["top_cpus"] for m in monitored)
