"""bench/live/copy_check.py and copy_check_report.py against a stand-in server (a real HTTP
process): exact outputs pass, a wrong token, an aborted request's wrong prefix and KV left in
use after a phase each fail; the report reads switches and faults from logs and re-entry accept
lengths from the tracer's decision records."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

LIVE = Path(__file__).resolve().parents[2] / "bench" / "live"

STAND_IN = r"""
import json, sys, threading, time
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
port, fault = int(sys.argv[1]), sys.argv[2]
aborted, lock, live = set(), threading.Lock(), [0]
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def reply(self, obj):
        raw = json.dumps(obj).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(raw)))
        self.end_headers(); self.wfile.write(raw)
    def do_GET(self):  # /get_load
        leak = 7 if fault == "leak" else 0
        self.reply([{"num_reqs": live[0], "num_tokens": leak, "dp_rank": 0}])
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/abort_request":
            with lock: aborted.add(body["rid"])
            return self.reply({})
        with lock: live[0] += 1
        seq, out, n = list(body["input_ids"]), [], body["sampling_params"]["max_new_tokens"]
        reason = "length"
        for k in range(n):
            time.sleep(0.005 if fault == "deaf" else 0.002)
            with lock: stop = body["rid"] in aborted
            if stop and fault not in ("overshoot", "deaf"):
                reason = "abort"; break
            nxt = (seq[-2] + 1) % 4096
            if fault == "wrong" and k == 5: nxt += 1
            if fault == "abort-prefix" and k == 3 and n > 100: nxt += 1
            seq.append(nxt); out.append(nxt)
        with lock: late = fault == "overshoot" and body["rid"] in aborted
        if late:  # the abort came as it reached its length: one more token, the right one
            out.append((seq[-2] + 1) % 4096); reason = "abort"
        with lock: live[0] -= 1
        self.reply({"output_ids": out, "meta_info": {"finish_reason": {"type": reason}}})
ThreadingHTTPServer.request_queue_size = 128  # the burst connects 32 at once
ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_check(
    tmp_path: Path, fault: str, phases: str = "serial,burst,load", *extra: str
) -> list[dict]:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", STAND_IN, str(port), fault])
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        out = tmp_path / "copy.jsonl"
        subprocess.run(
            [sys.executable, str(LIVE / "copy_check.py"), "--port", str(port), "--label", fault,
             "--vocab", "4096", "--offset", "2", "--phases", phases, "--conc", "8",
             "--requests", "24", "--out", str(out), *extra],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
    finally:
        server.kill()
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_exact_outputs_and_aborts_pass(tmp_path):
    lines = run_check(tmp_path, "none")
    assert [line["phase"] for line in lines] == ["start", "serial", "burst", "load"]
    for line in lines[1:]:
        assert line["ok"], line
    load = lines[-1]
    assert load["requests"] == 24 and load["aborted"] > 0
    assert load["exact"] + load["aborted"] == 24
    assert load["aborted_prefix_ok"] == load["aborted"]


@pytest.mark.parametrize("fault", ["wrong", "leak", "abort-prefix"])
def test_each_fault_fails_its_phase(tmp_path, fault):
    lines = run_check(tmp_path, fault, "load" if fault == "abort-prefix" else "serial")
    line = lines[-1]
    assert not line["ok"], line
    if fault == "wrong":
        assert line["mismatch_count"] == 4 and line["mismatches"][0]["first"] == 5
    if fault == "leak":
        assert line["idle_kv_tokens"] == 7 and not line["mismatches"]


def test_an_abort_answered_past_its_length_is_compared_and_counted(tmp_path):
    line = run_check(tmp_path, "overshoot", "load")[-1]
    assert line["ok"] and line["aborted"] > 0, line
    assert line["aborted_overshoot"] == line["aborted"] == line["aborted_prefix_ok"]


def test_an_abort_the_server_does_not_see_fails_the_phase(tmp_path):
    # the stand-in answers every request in full, 5 ms a token, whatever was aborted
    line = run_check(tmp_path, "deaf", "load")[-1]
    assert line["aborted"] == 0 and line["exact"] == 24 and not line["mismatches"]
    assert line["aborts_missed"] > 0 and not line["ok"], line


def test_a_storm_runs_whole_rounds_within_its_time(tmp_path):
    progress = tmp_path / "progress.jsonl"
    line = run_check(tmp_path, "none", "storm", "--storm-s", "0.5", "--progress", str(progress))[-1]
    assert line["phase"] == "storm" and line["rounds"] == 1 and line["requests"] == 24, line
    assert line["ok"] and line["aborts_missed"] == 0
    rounds = [json.loads(x) for x in progress.read_text().splitlines()]
    assert [(r["round"], r["requests"]) for r in rounds] == [(1, 24)]


def decision(step: int, length: float | None) -> str:
    facts = {"hook_step": step, "spec_on": length is not None, "accept_length": length}
    return json.dumps({"type": "call", "role": "decision", "facts": facts})


def test_report_reads_logs_and_reentry(tmp_path):
    results = tmp_path / "copy.jsonl"
    ok = {"label": "plain_k2", "phase": "load", "requests": 3, "exact": 3, "aborted": 0,
          "errors": [], "idle_kv_tokens": 0, "ok": True}  # fmt: skip
    results.write_text(json.dumps(ok) + "\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "server_plain_k2.log").write_text(
        "sgtrace-hook switched spec=off (plain off state): 3 running requests retracted\n" * 5
        + "sgtrace-hook aborted 2 held requests (retracted at a switch)\n" * 2
        + "Testing retraction. #retracted_reqs: 1, #new_tokens_gained: 40\n" * 3
    )
    (logs / "server_base.log").write_text("Traceback (most recent call last):\n")
    trace = tmp_path / "hooks" / "plain_k384"
    trace.mkdir(parents=True)
    steps = [None] * 3 + [1.0, 2.0, 2.0, 2.0] + [None] * 3 + [1.0, 3.0, 3.0] + [None] + [2.0]
    trace.joinpath("events-1.jsonl").write_text(
        "\n".join(decision(k, length) for k, length in enumerate(steps)) + "\n"
    )
    subprocess.run(
        [sys.executable, str(LIVE / "copy_check_report.py"), "--results", str(results),
         "--logs", str(logs), "--traces", str(tmp_path / "hooks"), "--out", str(tmp_path)],
        check=True, capture_output=True,
    )  # fmt: skip
    report = json.loads((tmp_path / "copy_check.json").read_text())
    assert report["servers"]["plain_k2"]["switches"] == 5 and report["servers"]["plain_k2"]["ok"]
    assert report["servers"]["plain_k2"]["held_aborted"] == 4
    assert report["servers"]["plain_k2"]["forced_retractions"] == 3
    assert report["servers"]["plain_k2"]["memory_retractions"] == 0
    assert not report["servers"]["base"]["ok"] and not report["all_ok"]
    reentry = report["reentry"]["plain_k384"]
    assert reentry["stretches_on"] == 1  # the first and the last stretch are cut
    assert reentry["first_result_after_on"] == 1.0
    assert reentry["accept_length_by_position"]["0-31"] == {"mean": 2.333, "results": 3}
