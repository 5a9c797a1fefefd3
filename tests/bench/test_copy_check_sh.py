"""bench/live/copy_check.sh run whole, by bash, with stand-ins for the GPU's side: which server
each name starts (suffixes _tight, _squeeze, _retract: its KV pool, SGLang's admission, SGLang's
forced retraction), with which hook directory, and the report over all of them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.bench.test_copy_check import STAND_IN, free_port

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

PYTHON3 = """#!/usr/bin/env bash
case " $* " in
  *make_copy_model.py*) echo '{{"rule": "stand-in"}}'; exit 0 ;;
  *" -m sglang.launch_server "*)
    port=$(echo " $* " | sed -E 's/.* --port ([0-9]+) .*/\\1/')
    echo "args: $*"; echo "pythonpath: $PYTHONPATH"; echo "retract: ${{SGLANG_TEST_RETRACT:-}}"
    echo "The server is fired up and ready to roll!"
    exec {python} {server} "$port" none ;;
esac
exec {python} "$@"
"""


def test_each_name_starts_its_server_and_all_are_judged(tmp_path):
    for d in ("bin", "recipe", "site", "hooks/plain_k1/sgtrace_payload", "hooks/plain_k2"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "recipe" / "site.tar.xz").write_bytes(b"")
    (tmp_path / "site" / ".ok").write_text("")
    for hook in ("plain_k1", "plain_k2"):
        (tmp_path / "hooks" / hook / "sgtrace_hook.json").write_text("{}")
    server = tmp_path / "stand_in.py"
    server.write_text(STAND_IN)
    wrapper = tmp_path / "bin" / "python3"
    wrapper.write_text(PYTHON3.format(python=sys.executable, server=server))
    wrapper.chmod(0o755)
    out, logs = tmp_path / "out", tmp_path / "logs"
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "OUT": str(out),
        "SERVERS": "base plain_k2_retract eagle3_squeeze",
        "PORT_BASE": str(free_port()),
        "RECIPE": str(tmp_path / "recipe"),
        "HOOKS": str(tmp_path / "hooks"),
        "LOGS": str(logs),
        "SITE": str(tmp_path / "site"),
        "JITC": str(tmp_path / "jit"),
        "MODEL": str(tmp_path / "model"),
    }
    done = subprocess.run(
        ["bash", "bench/live/copy_check.sh"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    head = {n: (logs / f"server_{n}.log").read_text().split("ready to roll")[0]
            for n in ("base", "plain_k2_retract", "eagle3_squeeze")}  # fmt: skip
    assert "--speculative-algorithm" not in head["base"] and "retract: \n" in head["base"]
    assert "--max-total-tokens 65536" in head["base"]
    retract = head["plain_k2_retract"]
    assert "retract: 1" in retract and "--speculative-algorithm EAGLE3" in retract
    assert f"pythonpath: {tmp_path / 'hooks' / 'plain_k2'}:" in retract
    squeeze = head["eagle3_squeeze"]
    assert "--max-total-tokens 3072 --schedule-conservativeness 0.05" in squeeze
    assert "--speculative-algorithm EAGLE3" in squeeze and "hooks" not in squeeze
    report = json.loads((out / "copy_check.json").read_text())
    assert report["all_ok"] and set(report["servers"]) == {
        "base",
        "plain_k2_retract",
        "eagle3_squeeze",
    }
    for facts in report["servers"].values():
        assert [p["phase"] for p in facts["phases"]] == ["serial", "burst", "load"]
