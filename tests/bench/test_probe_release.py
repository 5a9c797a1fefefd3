"""bench/live/probe_release.sh and its report, without a GPU: the report reads where a server
stopped and what an observe-only hook logged; the script refuses to start without its carry."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

LIVE = Path(__file__).resolve().parents[2] / "bench" / "live"


def load_report():
    spec = importlib.util.spec_from_file_location(
        "probe_release_report", LIVE / "probe_release_report.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DIED = """\
[2026-12-04 06:00:00] server_args=ServerArgs(model_path='/tmp/tiny-probe/target')
[2026-12-04 06:00:10 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/tmp/sg013/sglang/srt/managers/scheduler.py", line 3000, in run_scheduler_process
    scheduler = Scheduler(server_args)
  File "/tmp/site-probe/sgl_kernel/__init__.py", line 20, in <module>
    common_ops = _load_architecture_specific_ops()
ImportError: libnuma.so.1: cannot open shared object file: No such file or directory
[2026-12-04 06:00:11] Received sigquit from a child process. It usually means the child failed.
"""

HOOK = """\
[2026-12-04 06:00:00 TP0] sgtrace-hook rank=0: observe only, decisions are logged but not applied: sglang==0.5.13: no zero-step state
[2026-12-04 06:00:05] The server is fired up and ready to roll!
[2026-12-04 06:00:30 TP0] sgtrace-hook toggle step=120 rank=0 batch_size=24 spec=off reason=load applied=no
[2026-12-04 06:00:31 TP0] sgtrace-hook toggle step=160 rank=0 batch_size=6 spec=on reason=load applied=no
"""


def test_the_report_says_where_a_server_stopped_and_checks_the_hook_switched_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, logs = tmp_path / "out", tmp_path / "logs"
    out.mkdir()
    logs.mkdir()
    (logs / "server_eagle013.log").write_text(DIED)
    (logs / "server_hook013.log").write_text(HOOK)
    rows = [
        {
            "label": "base013",
            "release": "0.5.13",
            "kind": "base",
            "started_at_s": 12,
            "ready_at_s": 90,
        },
        {
            "label": "eagle013",
            "release": "0.5.13",
            "kind": "eagle",
            "started_at_s": 12,
            "ready_at_s": "dead",
        },
        {
            "label": "hook013",
            "release": "0.5.13",
            "kind": "hook",
            "started_at_s": 13,
            "ready_at_s": 120,
        },
        {"label": "hook013", "concurrency": 8, "tok_per_s": 2000.5, "tokens_per_verify": 1.01},
    ]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    greedy = [
        {"label": "base013", "pass": "serial", "outputs": [[1, 2, 3], [4, 5]], "errors": []},
        {"label": "hook013", "pass": "serial", "outputs": [[1, 2, 3], [4, 6]], "errors": []},
    ]
    (out / "greedy.jsonl").write_text("".join(json.dumps(g) + "\n" for g in greedy))
    names = ["base013", "eagle013", "hook013"]
    monkeypatch.setattr(
        "sys.argv", ["report", "--out", str(out), "--logs", str(logs), "--names", *names]
    )
    load_report().main()
    got = json.loads((out / "probe_release.json").read_text())
    eagle = got["servers"]["eagle013"]
    assert eagle["status"] == "dead"
    assert eagle["stopped"]["exception"].startswith("ImportError: libnuma.so.1")
    assert eagle["stopped"]["raised_at"] == "/tmp/site-probe/sgl_kernel/__init__.py:20 in <module>"
    hook = got["servers"]["hook013"]
    assert hook["ready_s"] == 107
    assert hook["hook"]["observe_only_ok"] and hook["hook"]["would_switch_off"]
    assert not hook["hook"]["any_applied"]
    assert hook["greedy"]["serial"]["differing_prompts"] == [{"prompt": 1, "first_diff_at": 1}]
    verdicts = got["verdicts"]
    assert verdicts["hook013_observe_only"] is True
    assert verdicts["hook013_greedy_identical_serial"] is False
    assert "ImportError: libnuma.so.1" in (out / "probe_release.md").read_text()


def test_a_hook_that_applied_a_switch_is_not_observe_only() -> None:
    lines = HOOK.replace(" applied=no", "").splitlines()
    summary = load_report().hook_summary(lines)
    assert summary["any_applied"] and not summary["observe_only_ok"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_script_parses_and_refuses_to_start_without_its_carry(tmp_path: Path) -> None:
    subprocess.run(["bash", "-n", str(LIVE / "probe_release.sh")], check=True)
    live = tmp_path / "bench" / "live"
    live.mkdir(parents=True)
    for name in ("probe_release.sh", "device_env.sh", "greedy_check.py", "probe_release_report.py"):
        shutil.copy(LIVE / name, live / name)
    out = tmp_path / "out"
    run = subprocess.run(
        ["bash", "bench/live/probe_release.sh"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "OUT": str(out), "DRY": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert "MISSING .carry/probe013/base.tar.xz" in run.stdout
