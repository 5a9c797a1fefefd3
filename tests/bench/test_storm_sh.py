"""bench/live/storm.sh run whole, by bash, in its two calls: the server and the storm client it
starts outlive the first call (their own sessions), the second finds them, waits and reports.
Stand-ins for the GPU's side (the copy-check stand-in server, a python3 wrapper for the model
builder); copy_check.py, the report and the server lifecycle are the real ones."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.bench.copy_stand_in import stand_in
from tests.bench.test_copy_check import free_port

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def call(
    tmp_path: Path, verb: str, deadline_s: int, out: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    env = {
        **(env or os.environ),
        "OUT": str(out),
        "DEADLINE_S": str(deadline_s),
        "STORM_S": "1",
        "NAME": "storm_test",
        "PORT": str(free_port()) if verb == "start" else "0",
        "STATE": str(tmp_path / "state"),
        "HOOKS": str(tmp_path / "hooks"),
        "LOGS": str(tmp_path / "logs"),
    }
    return subprocess.run(
        ["bash", "bench/live/storm.sh", verb],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=150,
    )  # fmt: skip


def test_the_storm_outlives_its_first_call_and_the_second_reports_it(tmp_path):
    env = stand_in(tmp_path, ("storm_test",))
    first = call(tmp_path, "start", 21, tmp_path / "out1", env)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    assert "server and storm left running" in (tmp_path / "out1" / "run.log").read_text()
    server_pid = int(Path("/tmp/server-storm_test.pid").read_text())
    os.killpg(server_pid, 0)  # still running after the first call returned
    log = (tmp_path / "logs" / "server_storm_test.log").read_text()
    assert f"pythonpath: {tmp_path / 'hooks' / 'storm_test'}:{tmp_path / 'site'}" in log

    second = call(tmp_path, "finish", 120, tmp_path / "out2", env)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    out = tmp_path / "out2"
    phases = [json.loads(line) for line in (out / "copy.jsonl").read_text().splitlines()]
    assert [p["phase"] for p in phases] == ["start", "serial", "storm"]
    assert all(p["ok"] for p in phases[1:]) and phases[-1]["requests"] == 80
    rounds = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rounds] == [1]
    report = json.loads((out / "copy_check.json").read_text())
    assert report["all_ok"] and report["servers"]["storm_test"]["switches"] == 1
    assert (out / "servers.tgz").stat().st_size > 0
    with pytest.raises(ProcessLookupError):  # the second call stopped the server
        os.killpg(server_pid, 0)


def test_finish_without_a_storm_on_the_machine_says_so(tmp_path):
    done = call(tmp_path, "finish", 120, tmp_path / "out")
    assert done.returncode == 2
    assert "no storm on this machine" in (tmp_path / "out" / "run.log").read_text()
