"""bench/live/copy_check.sh run whole, by bash, with stand-ins for the GPU's side: which server
each name starts (suffixes _tight, _squeeze, _retract: its KV pool, SGLang's admission, SGLang's
forced retraction), with which hook directory, and the report over all of them."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.bench.copy_stand_in import stand_in
from tests.bench.test_copy_check import free_port

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def test_each_name_starts_its_server_and_all_are_judged(tmp_path):
    env = stand_in(tmp_path, ("plain_k1", "plain_k2"))
    out, logs = tmp_path / "out", Path(env["LOGS"])
    env = {
        **env,
        "OUT": str(out),
        "SERVERS": "base plain_k2_retract eagle3_squeeze",
        "PORT_BASE": str(free_port()),
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
    # the payload travelled in plain_k1 only (--share-payload): plain_k2 got it before its start
    assert (tmp_path / "hooks" / "plain_k2" / "sitecustomize.py").read_text() == "# the payload's\n"
    assert (tmp_path / "hooks" / "plain_k2" / "sgtrace_payload").is_dir()
    report = json.loads((out / "copy_check.json").read_text())
    assert report["all_ok"] and set(report["servers"]) == {
        "base",
        "plain_k2_retract",
        "eagle3_squeeze",
    }
    for facts in report["servers"].values():
        assert [p["phase"] for p in facts["phases"]] == ["serial", "burst", "load"]


def test_the_builders_options_set_the_offset_the_check_expects(tmp_path):
    # the stand-in builder writes models.json as make_copy_model.py derives it (D = L + 1) and
    # the stand-in servers answer by it: every output exact only if copy_check.py read it back
    env = stand_in(tmp_path, ("plain_k1", "plain_k2"))
    out = tmp_path / "out"
    env = {
        **env,
        "OUT": str(out),
        "SERVERS": "plain_k2 base",
        "COPY_MODEL_ARGS": "--draft-lag 8",
        "PORT_BASE": str(free_port()),
    }
    done = subprocess.run(
        ["bash", "bench/live/copy_check.sh"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    builder = (tmp_path / "model.args").read_text().split()
    assert builder[-3:] == ["--check", "--draft-lag", "8"]
    assert "next = seq[-9] + 1 (mod 4096), builder options: --draft-lag 8" in done.stdout
    report = json.loads((out / "copy_check.json").read_text())
    assert report["model"] == {"offset": 9, "vocab": 4096}
    assert report["all_ok"] and set(report["servers"]) == {"plain_k2", "base"}
    for facts in report["servers"].values():
        assert [p["phase"] for p in facts["phases"]] == ["serial", "burst", "load"]
        assert sum(p["exact"] for p in facts["phases"]) >= 4 + 32
