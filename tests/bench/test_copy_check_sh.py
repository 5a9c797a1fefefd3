"""bench/live/copy_check.sh run whole, by bash, with stand-ins for the GPU's side: which server
each name starts (suffixes _tight, _squeeze, _retract: its KV pool, SGLang's admission, SGLang's
forced retraction), with which hook directory, and the report over all of them; on the recipe's
bundle (SGLang 0.5.16) and on a probe carry (SGLang 0.5.13: its archives unpacked, its release
first on each server's PYTHONPATH, its own flag for the prefill CUDA graph)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.bench.copy_stand_in import probe_carry, stand_in
from tests.bench.test_copy_check import free_port

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def copy_check(env: dict[str, str], servers: str) -> subprocess.CompletedProcess:
    env = {**env, "SERVERS": servers, "PORT_BASE": str(free_port())}
    return subprocess.run(
        ["bash", "bench/live/copy_check.sh"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip


def test_each_name_starts_its_server_and_all_are_judged(tmp_path):
    env = stand_in(tmp_path, ("plain_k1", "plain_k2"))
    out, logs = tmp_path / "out", Path(env["LOGS"])
    done = copy_check({**env, "OUT": str(out)}, "base plain_k2_retract eagle3_squeeze")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    head = {n: (logs / f"server_{n}.log").read_text().split("ready to roll")[0]
            for n in ("base", "plain_k2_retract", "eagle3_squeeze")}  # fmt: skip
    assert "--speculative-algorithm" not in head["base"] and "retract: \n" in head["base"]
    assert "--max-total-tokens 65536" in head["base"]
    assert " --disable-prefill-cuda-graph " in head["base"]
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


def test_a_probe_carry_is_unpacked_and_its_release_serves_with_its_own_flags(tmp_path):
    env = probe_carry(tmp_path, ("plain_k1", "plain_k2"))
    out, logs = tmp_path / "out", Path(env["LOGS"])
    done = copy_check({**env, "OUT": str(out)}, "plain_k2_squeeze base")  # no storm: base last
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    site, release = tmp_path / "site-probe", tmp_path / "sg013"
    assert (site / "transformers").is_dir() and (site / "sgl_kernel").is_dir()
    assert (release / "sglang" / "srt" / "server_args.py").is_file()
    head = {n: (logs / f"server_{n}.log").read_text().split("ready to roll")[0]
            for n in ("base", "plain_k2_squeeze")}  # fmt: skip
    assert f"pythonpath: {release}:{site}\n" in head["base"]
    hook = tmp_path / "probe013" / "plain-check" / "plain_k2"
    assert f"pythonpath: {hook}:{release}:{site}\n" in head["plain_k2_squeeze"]
    # 0.5.13 has no --disable-prefill-cuda-graph (the stand-in refuses it) and logs a traceback
    # of its optional Responses API at start, which the report does not count as a fault
    for text in head.values():
        assert " --disable-piecewise-cuda-graph " in text
        assert "Can not initialize OpenAIServingResponses" in text
    assert (hook / "sgtrace_payload").is_dir()
    run_log = (out / "run.log").read_text()
    installed = [line.split("] ", 1)[1] for line in run_log.splitlines() if "] installed:" in line]
    assert installed == [
        "installed: sglang-0.5.13.dist-info, prefill CUDA graph off: --disable-piecewise-cuda-graph"
    ]
    report = json.loads((out / "copy_check.json").read_text())
    assert report["all_ok"] and set(report["servers"]) == {"base", "plain_k2_squeeze"}


def test_a_probe_carry_without_its_kernel_archive_is_refused_before_anything_starts(tmp_path):
    env = probe_carry(tmp_path, ("plain_k1",))
    (tmp_path / "probe013" / "kernel.tar.xz").unlink()
    out = tmp_path / "out"
    done = copy_check({**env, "OUT": str(out)}, "base")
    assert done.returncode == 2
    assert f"MISSING {tmp_path / 'probe013' / 'kernel.tar.xz'}" in (out / "run.log").read_text()
    assert not (tmp_path / "site-probe").exists()
    assert list(Path(env["LOGS"]).glob("server_*")) == []
