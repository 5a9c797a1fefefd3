"""probe_release.sh with the plain off state (``SERVERS=plain``), without a GPU: the plain hook
directories prepare_probe_release.py writes are the ones launched, each server is measured in
phases, and the report counts toggles, switches, leaks, crashes and requests per server."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.bench.test_live_sweep import script
from tests.bench.test_probe_release import stand_in_checkout

from sgtrace.cli.hook import policy_from
from sgtrace.hooks.policy_config import load_policy_config

PLAIN = ["plain_off013", "plain_k2_013", "plain_k7_013"]

# A stand-in server: says which directory leads its PYTHONPATH; with a plain hook directory it
# logs as the plain off state does (attached, graphs ready; plain_off switches off once, plain_k*
# off and on at each request); FAKE_LEAK names a port whose server, at the first load request,
# logs SGLang's idle self-check failure and dies. plain_off's 88-token outputs differ from base.
FAKE_SERVER = """\
import json, os, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
lead = os.environ.get("PYTHONPATH", "").split(":")[0]
plain = os.path.basename(lead) if "/plain_" in lead else ""
print(f"stand-in PYTHONPATH[0]={lead}", flush=True)
if plain:
    print("[TP0] sgtrace-hook attached rank=0 worker=EAGLEWorkerV2 (off = plain decode, switching by re-admitting the running requests)")
    print("[TP0] sgtrace-hook plain off state ready: the target's DECODE graphs captured", flush=True)
print("The server is fired up and ready to roll!", flush=True)
state = {"off": False}
lock = threading.Lock()  # whole lines, as SGLang's logging writes them
def switch(spec):
    with lock:
        print(f"[TP0] sgtrace-hook toggle step=3 rank=0 batch_size=1 spec={spec} reason=forced")
        print(f"[TP0] sgtrace-hook switched spec={spec} (plain off state): 1 running requests retracted", flush=True)
class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        n = body["sampling_params"]["max_new_tokens"]
        if n == 8 and str(port) in os.environ.get("FAKE_LEAK", "").split():
            print("[TP0] Scheduler hit an exception: Traceback (most recent call last):")
            print('  File "/tmp/sg013/sglang/srt/managers/scheduler.py", line 3306, in on_idle')
            print("ValueError: pool memory leak detected! [full] total=262144, available=262120", flush=True)
            os._exit(1)
        if plain.startswith("plain_off") and not state["off"]:
            state["off"] = True  # a race here could switch twice: the serial pass comes first
            switch("off")
        elif plain.startswith("plain_k"):
            switch("off")
            switch("on")
        ids = [len(body["text"]) + i for i in range(n)]
        if plain.startswith("plain_off") and n == 88:
            ids[-1] += 1
        data = json.dumps({"output_ids": ids, "meta_info": {"completion_tokens": n}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
class S(ThreadingHTTPServer):
    request_queue_size = 128
S(("127.0.0.1", port), H).serve_forever()
"""


def make_repo(tmp_path: Path, plain_dirs: list[str]) -> tuple[Path, dict[str, str]]:
    """A checkout with the scripts and a stand-in .carry/probe013; the env that runs it."""
    root, env = stand_in_checkout(tmp_path, FAKE_SERVER, ["hook013", *plain_dirs])
    env["SERVERS"] = "plain"
    return root, env


def run(root: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    cmd = ["bash", "bench/live/probe_release.sh"]
    return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=240)


def test_the_plain_hook_directories_carry_prepare_hook_checks_policies() -> None:
    prepare = script("prepare_probe_release")
    table = script("prepare_hook_check").PLAIN_POLICIES
    flags = prepare.plain_hook_args(table, "013")
    assert list(flags) == PLAIN
    assert flags["plain_k2_013"] == ["--set", "toggle_every_steps=2"]
    for name, policy in zip(PLAIN, ("plain_off", "plain_k2", "plain_k7"), strict=True):
        settings = tuple(flags[name][1::2])  # what inject-hook's --set receives
        assert policy_from(None, settings) == load_policy_config(None, table[policy]), name


def test_the_calls_size_counts_the_carried_folder_that_holds_the_hook_directories(
    tmp_path: Path,
) -> None:
    carried = script("prepare_hook_check").carried_folder
    assert (
        carried(tmp_path / ".carry/probe013/plain-check", tmp_path) == tmp_path / ".carry/probe013"
    )
    assert carried(tmp_path / ".carry/plain-check", tmp_path) == tmp_path / ".carry/plain-check"
    assert carried(tmp_path / "elsewhere/plain-check", tmp_path) is None


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_servers_plain_without_plain_directories_refuses(tmp_path: Path) -> None:
    root, env = make_repo(tmp_path, [])
    done = run(root, {**env, "DRY": "1"})
    assert done.returncode == 2
    assert "no plain_* hook directory in .carry/probe013" in done.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_dry_run_lists_base_and_each_plain_server_with_its_directory(tmp_path: Path) -> None:
    root, env = make_repo(tmp_path, PLAIN)
    done = run(root, {**env, "DRY": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    launches = [x for x in done.stdout.splitlines() if "sglang.launch_server" in x]
    leads = [x.split("=", 1)[1].split(":")[0] for x in launches]
    assert leads == [f"{tmp_path}/sg013"] + [f"{root}/.carry/probe013/{n}" for n in PLAIN]
    assert ["--speculative-algorithm" in x for x in launches] == [False, True, True, True]


@pytest.mark.skipif(
    shutil.which("bash") is None or shutil.which("setsid") is None, reason="needs bash, setsid"
)
def test_the_plain_run_with_stand_in_servers(tmp_path: Path) -> None:
    """base013 and the three plain servers measured in phases; plain_k7_013 leaks and dies in
    its load phase; the report says so, and counts the others' toggles and greedy matches."""
    root, env = make_repo(tmp_path, PLAIN)
    done = run(root, {**env, "FAKE_LEAK": "31300"})  # plain_k7_013: the fourth server's port
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name in PLAIN:
        log = (tmp_path / "logs" / f"server_{name}.log").read_text()
        assert log.startswith(f"stand-in PYTHONPATH[0]={root}/.carry/probe013/{name}\n")
    got = json.loads((tmp_path / "out" / "probe_release.json").read_text())
    servers = got["servers"]
    assert list(servers) == ["base013", *PLAIN]
    assert [r["concurrency"] for r in servers["base013"]["load"]] == [1, 8, 32, 64]
    assert [r["concurrency"] for r in servers["plain_k2_013"]["load"]] == [1, 8, 32, 64]
    greedy = servers["plain_off013"]["greedy"]
    assert (greedy["serial"]["n_identical"], greedy["serial"]["compared"]) == (4, 4)
    assert (greedy["burst"]["n_identical"], greedy["burst"]["compared"]) == (22, 24)
    k2 = servers["plain_k2_013"]["phases"]
    assert [k2[p]["switches"] for p in ("serial", "burst", "load")] == [8, 48, 8]
    assert [k2[p]["toggles_off"] for p in ("serial", "burst", "load")] == [4, 24, 4]
    assert servers["plain_off013"]["plain"]["switches"] == 1
    leaker = servers["plain_k7_013"]
    assert leaker["phases"]["load"]["crashed"] and leaker["phases"]["load"]["leak_lines"] == 1
    assert leaker["first_traceback"][0] == (
        "ValueError: pool memory leak detected! [full] total=262144, available=262120"
    )
    verdicts = got["verdicts"]
    expected = {
        f"{name}_{check}": name != "plain_k7_013"
        for name in ["base013", *PLAIN]
        for check in ("no_crash", "no_leak", "requests_all_ok")
    }
    expected.update({f"{name}_plain_attached": True for name in PLAIN})
    expected.update({f"{name}_switched": True for name in PLAIN})
    assert {k: verdicts[k] for k in expected} == expected
    md = (tmp_path / "out" / "probe_release.md").read_text()
    assert "| plain_k7_013 | ready | 4/4 | 24/24 |" in md and "LEAK in load" in md
