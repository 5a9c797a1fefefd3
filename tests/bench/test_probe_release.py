"""bench/live/probe_release.sh and its report, without a GPU: the report reads where a server
stopped and what an observe-only hook logged; the script refuses to start without its carry."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

LIVE = Path(__file__).resolve().parents[2] / "bench" / "live"
SCRIPTS = (
    "probe_release.sh",
    "device_env.sh",
    "greedy_check.py",
    "probe_release_report.py",
    "probe_plain_report.py",
)


def load_report():
    """probe_release_report.py as ``python3 bench/live/probe_release_report.py`` runs it: its
    sibling probe_plain_report.py found in bench/live while it loads."""
    spec = importlib.util.spec_from_file_location(
        "probe_release_report", LIVE / "probe_release_report.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(LIVE))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(LIVE))
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
[2026-12-04 06:00:00 TP0] sgtrace-hook attached rank=0 worker=EAGLEWorkerV2 (off = plain decode, switching by re-admitting the running requests)
[2026-12-04 06:00:05] The server is fired up and ready to roll!
[2026-12-04 06:00:30 TP0] sgtrace-hook toggle step=120 rank=0 batch_size=24 spec=off reason=high-load
[2026-12-04 06:00:30 TP0] sgtrace-hook switched spec=off (plain off state): 24 running requests retracted
[2026-12-04 06:00:31 TP0] sgtrace-hook toggle step=160 rank=0 batch_size=6 spec=on reason=low-load
[2026-12-04 06:00:31 TP0] sgtrace-hook switched spec=on (plain off state): 6 running requests retracted
"""
OBSERVING = """\
[2026-12-04 06:00:00 TP0] sgtrace-hook rank=0: observe only: --speculative-adaptive is on: upstream's controller owns the switch
[2026-12-04 06:00:30 TP0] sgtrace-hook toggle step=120 rank=0 batch_size=24 spec=off reason=high-load applied=no
"""


def test_the_report_says_where_a_server_stopped_and_checks_the_hook_switched(
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
    assert hook["hook"]["switches_ok"] and hook["hook"]["switched_off"]
    assert (hook["hook"]["n_toggles"], hook["hook"]["switch_lines"]) == (2, 2)
    assert hook["greedy"]["serial"]["differing_prompts"] == [{"prompt": 1, "first_diff_at": 1}]
    verdicts = got["verdicts"]
    assert (verdicts["hook013_switches"], verdicts["hook013_switched_off"]) == (True, True)
    assert verdicts["hook013_greedy_identical_serial"] is False
    assert "ImportError: libnuma.so.1" in (out / "probe_release.md").read_text()


def test_a_hook_that_only_observed_or_never_switched_fails() -> None:
    observing = load_report().hook_summary(OBSERVING.splitlines())
    assert (observing["all_applied"], observing["switches_ok"]) == (False, False)
    assert observing["errors"] == [OBSERVING.splitlines()[0].split("] ", 1)[1]]
    unswitched = [x for x in HOOK.splitlines() if "switched spec=" not in x]
    summary = load_report().hook_summary(unswitched)
    assert (summary["all_applied"], summary["switch_lines"], summary["switches_ok"]) == (
        True,
        0,
        False,
    )


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_script_parses_and_refuses_to_start_without_its_carry(tmp_path: Path) -> None:
    subprocess.run(["bash", "-n", str(LIVE / "probe_release.sh")], check=True)
    live = tmp_path / "bench" / "live"
    live.mkdir(parents=True)
    for name in SCRIPTS:
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


PYTHON3 = """#!/usr/bin/env bash
# the device's python3, but for the model builder and the SGLang server (stand-ins)
case " $* " in
  *make_tiny_models.py*) mkdir -p "$2/target" "$2/draft"; echo "tiny models (stand-in)"; exit 0 ;;
  *" -m sglang.launch_server "*) exec {python} {fake} "$@" ;;
esac
exec {python} "$@"
"""

# A stand-in server: dies at start when FAKE_DIE names it (unless --disable-cuda-graph), logs
# like the hook (its toggles switched through the plain decode path) when its PYTHONPATH holds a
# hook directory, answers /generate with token ids that depend on the prompt alone.
FAKE_SERVER = """\
import json, os, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
spec = "--speculative-algorithm" in args
hook = "/hook0" in os.environ.get("PYTHONPATH", "")
if str(port) in os.environ.get("FAKE_DIE", "").split() and "--disable-cuda-graph" not in args:
    print("[TP0] Scheduler hit an exception: Traceback (most recent call last):")
    print('  File "/x/sglang/srt/model_executor/cuda_graph_runner.py", line 400, in capture')
    print("    self.capture_one()")
    print("RuntimeError: stand-in capture failure", flush=True)
    sys.exit(1)
if hook:
    print("[TP0] sgtrace-hook attached rank=0 worker=EAGLEWorkerV2 (off = plain decode, x)", flush=True)
print("The server is fired up and ready to roll!", flush=True)
class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        n = body["sampling_params"]["max_new_tokens"]
        if hook and n > 80:
            print("[TP0] sgtrace-hook toggle step=9 rank=0 batch_size=24 spec=off reason=load", flush=True)
            print("[TP0] sgtrace-hook switched spec=off (plain off state): 24 running requests retracted", flush=True)
        meta = {"completion_tokens": n, **({"spec_verify_ct": n} if spec else {})}
        data = json.dumps({"output_ids": [len(body["text"]) + i for i in range(n)], "meta_info": meta}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
class S(ThreadingHTTPServer):
    request_queue_size = 128
S(("127.0.0.1", port), H).serve_forever()
"""

# the recipe's load.py, reduced: one request per level, a failed one counted
FAKE_LOAD = """\
import argparse, json, urllib.request
p = argparse.ArgumentParser()
for a in ("--port", "--label", "--conc", "--requests", "--max-new", "--level-timeout", "--out"):
    p.add_argument(a)
a = p.parse_args()
for c in a.conc.split(","):
    body = json.dumps({"text": "x", "sampling_params": {"max_new_tokens": 8}}).encode()
    try:
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{a.port}/generate", data=body), timeout=10).read()
        ok = 1
    except OSError:
        ok = 0
    with open(a.out, "a") as fh:
        fh.write(json.dumps({"label": a.label, "concurrency": int(c), "requests_sent": 1,
                             "requests_ok": ok, "tok_per_s": 100.0 * int(c) * ok}) + "\\n")
"""


def tar_xz(path: Path, files: dict[str, str]) -> None:
    with tarfile.open(path, "w:xz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


@pytest.mark.skipif(
    shutil.which("bash") is None or shutil.which("setsid") is None, reason="needs bash, setsid"
)
def stand_in_checkout(
    tmp_path: Path, fake_server: str, hook_dirs: list[str]
) -> tuple[Path, dict[str, str]]:
    """A checkout with probe_release.sh's scripts, a stand-in .carry/probe013 with ``hook_dirs``,
    and the env that runs it: ``python3`` runs ``fake_server`` for SGLang's launch_server."""
    root = tmp_path / "repo"
    live = root / "bench" / "live"
    live.mkdir(parents=True)
    for name in SCRIPTS:
        shutil.copy(LIVE / name, live / name)
    carry = root / ".carry" / "probe013"
    for hook in hook_dirs:
        (carry / hook).mkdir(parents=True)
        (carry / hook / "sgtrace_hook.json").write_text("{}")
    tar_xz(carry / "base.tar.xz", {"base.txt": "base"})
    tar_xz(carry / "kernel.tar.xz", {"sgl_kernel/version.py": '__version__ = "0.4.3"\n'})
    tar_xz(
        carry / "sglang-0.5.13.tar.xz", {"sglang-0.5.13.dist-info/METADATA": "Version: 0.5.13\n"}
    )
    (carry / "load.py").write_text(FAKE_LOAD)
    (carry / "make_tiny_models.py").write_text("")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = tmp_path / "fake_server.py"
    fake.write_text(fake_server)
    (bin_dir / "python3").write_text(PYTHON3.format(python=sys.executable, fake=fake))
    (bin_dir / "python3").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "OUT": str(tmp_path / "out"),
        **{k: str(tmp_path / k.lower()) for k in ("SITE", "SG", "OV", "JITC", "TINY", "LOGS")},
        "DEADLINE_S": "400",
        "READY_TIMEOUT_S": "60",
    }
    return root, env


def test_the_whole_call_with_stand_in_servers(tmp_path: Path) -> None:
    """Starts, measures, retries the one that died without CUDA graphs, reports, packs."""
    root, env = stand_in_checkout(tmp_path, FAKE_SERVER, ["hook013"])
    env["FAKE_DIE"] = "31100"  # eagle013's port: it dies at start, its retry does not
    out = Path(env["OUT"])
    done = subprocess.run(
        ["bash", "bench/live/probe_release.sh"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    got = json.loads((out / "probe_release.json").read_text())
    servers = got["servers"]
    assert list(servers) == ["base013", "eagle013", "hook013", "eagle013_nograph"]
    assert servers["eagle013"]["stopped"]["exception"] == "RuntimeError: stand-in capture failure"
    assert servers["eagle013_nograph"]["status"] == "ready"
    assert [r["concurrency"] for r in servers["hook013"]["load"]] == [1, 8, 32]
    assert [r["concurrency"] for r in servers["base013"]["load"]] == [1, 8]
    verdicts = got["verdicts"]
    assert verdicts["hook013_switches"] and verdicts["hook013_switched_off"]
    assert (
        verdicts["hook013_greedy_identical_serial"] and verdicts["hook013_greedy_identical_burst"]
    )
    assert verdicts["eagle013_nograph_greedy_identical_burst"]
    back = sorted(p.name for p in out.iterdir())
    assert len(back) <= 8 and {"run.log", "servers.tgz", "probe_release.md"} <= set(back)
