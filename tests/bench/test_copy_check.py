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
offset = int(sys.argv[3]) if len(sys.argv) > 3 else 2  # next = seq[-offset] + 1
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
            nxt = (seq[-offset] + 1) % 4096
            if fault == "wrong" and k == 5: nxt += 1
            if fault == "abort-prefix" and k == 3 and n > 100: nxt += 1
            seq.append(nxt); out.append(nxt)
        with lock: late = fault == "overshoot" and body["rid"] in aborted
        if late:  # the abort came as it reached its length: one more token, the right one
            out.append((seq[-offset] + 1) % 4096); reason = "abort"
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
    tmp_path: Path,
    fault: str,
    phases: str = "serial,burst,load",
    *extra: str,
    offset: int = 2,
    server_offset: int = 2,
) -> list[dict]:
    """copy_check.py (expecting ``next = seq[-offset] + 1``) against the stand-in (answering
    with ``server_offset``); its JSON lines."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", STAND_IN, str(port), fault, str(server_offset)]
    )
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
             "--vocab", "4096", "--offset", str(offset), "--phases", phases, "--conc", "8",
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


def test_the_expectation_follows_the_offset(tmp_path):
    # prompts as long as the offset at least: the stand-in fails a shorter one (no seq[-9])
    lines = run_check(tmp_path, "none", "serial,burst", offset=9, server_offset=9)
    assert [line["ok"] for line in lines[1:]] == [True, True], lines
    assert lines[-1]["exact"] == 32 and not lines[-1]["errors"]
    line = run_check(tmp_path, "none", "serial", offset=9, server_offset=8)[-1]
    assert not line["ok"] and line["mismatch_count"] == 4 and not line["errors"], line


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


def report(tmp_path: Path) -> dict:
    """copy_check_report.py over ``tmp_path``'s copy.jsonl, logs/, hooks/ and models.json; its
    JSON."""
    for name in ("logs", "hooks"):
        (tmp_path / name).mkdir(exist_ok=True)
    subprocess.run(
        [sys.executable, str(LIVE / "copy_check_report.py"), "--results", str(tmp_path / "copy.jsonl"),
         "--logs", str(tmp_path / "logs"), "--traces", str(tmp_path / "hooks"),
         "--model", str(tmp_path / "models.json"), "--out", str(tmp_path)],
        check=True, capture_output=True,
    )  # fmt: skip
    return json.loads((tmp_path / "copy_check.json").read_text())


def test_report_reads_logs(tmp_path):
    ok = {"label": "plain_k2", "phase": "load", "requests": 3, "exact": 3, "aborted": 0,
          "errors": [], "idle_kv_tokens": 0, "ok": True}  # fmt: skip
    (tmp_path / "copy.jsonl").write_text(json.dumps(ok) + "\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "server_plain_k2.log").write_text(
        "sgtrace-hook switched spec=off (plain off state): 3 running requests retracted\n" * 5
        + "sgtrace-hook aborted 2 held requests (retracted at a switch)\n" * 2
        + "Testing retraction. #retracted_reqs: 1, #new_tokens_gained: 40\n" * 3
    )
    (logs / "server_base.log").write_text("Traceback (most recent call last):\n")
    got = report(tmp_path)
    assert got["servers"]["plain_k2"]["switches"] == 5 and got["servers"]["plain_k2"]["ok"]
    assert got["servers"]["plain_k2"]["held_aborted"] == 4
    assert got["servers"]["plain_k2"]["forced_retractions"] == 3
    assert got["servers"]["plain_k2"]["memory_retractions"] == 0
    assert not got["servers"]["base"]["ok"] and not got["all_ok"]
    assert got["reentry"] == {} and "model" not in got  # no trace, no models.json


MS = 1_000_000  # the tracer's t0 is in ns


def decisions(stretches: list[list[float]], on_ms: int) -> str:
    """A tracer events file of decision records: the given runs of speculative results (10 ms
    apart), between them a plain result and the plain result whose decision switched on, the
    first speculative result ``on_ms`` after that decision."""
    lines, step, t = [], 0, 0

    def record(length: float | None, spec_on: bool = True, changed: bool = False) -> None:
        nonlocal step
        facts = {"hook_step": step, "spec_on": spec_on, "changed": changed, "accept_length": length}
        lines.append(json.dumps({"type": "call", "role": "decision", "t0": t, "facts": facts}))
        step += 1

    for k, lengths in enumerate(stretches):
        if k:
            t += 10 * MS
            record(None, spec_on=False)
            t += 10 * MS
            record(None, changed=True)  # switches on
            t += on_ms * MS
        for length in lengths:
            record(length)
            t += 10 * MS
    other = json.dumps({"type": "call", "role": "verify", "t0": 5, "facts": {"batch_size": 2}})
    return "\n".join([other, *lines]) + "\n"


def test_report_reentry_by_position_and_what_the_catch_up_changed(tmp_path):
    cold = [1.0, 1.0, 1.0, 2.0] + [3.0] * 36  # 40 results: a cold start of 3 results and a half
    warm = [3.0] * 40
    for name, stretch, on_ms in (("plain_k384", cold, 20), ("plain_k384c", warm, 50)):
        trace = tmp_path / "hooks" / name
        trace.mkdir(parents=True)
        # the first stretch began at start-up, the last was cut by the end: both left out
        trace.joinpath("events-7.jsonl").write_text(
            decisions([[2.0] * 5, stretch, stretch, [1.0]], on_ms)
        )
    (tmp_path / "copy.jsonl").write_text("")
    model = {"rule": "next = seq[-9] + 1 (mod 4096)", "offset": 9, "draft_lag": 8,
             "draft_check": {"accept_length_checked": 3.4}}  # fmt: skip
    (tmp_path / "models.json").write_text(json.dumps(model))
    got = report(tmp_path)["reentry"]
    at = got["plain_k384"].pop("accept_length_at")
    assert at == [1.0, 1.0, 1.0, 2.0] + [3.0] * 36 + [None] * 88  # positions 0-127
    assert got["plain_k384"] == {
        "decisions": 5 + 2 * (2 + 40) + 2 + 1,
        "stretches_on": 2,
        "stretch_lengths": [40, 40],
        "accept_length_by_position": {
            "0": {"mean": 1.0, "results": 2},
            "1-3": {"mean": 1.333, "results": 6},
            "4-31": {"mean": 3.0, "results": 56},
            "32-127": {"mean": 3.0, "results": 16},
        },
        "steady_accept_length": 3.0,
        "tokens_lost_a_switch_on": 7.0,  # 2 + 2 + 2 + 1 tokens below steady
        "first_result_after_on": 1.0,
        "switch_on_to_first_result_ms": 20.0,
        "steady_result_period_ms": 10.0,
    }
    caught_up = got["plain_k384c"]
    assert caught_up["tokens_lost_a_switch_on"] == 0.0 and caught_up["first_result_after_on"] == 3.0
    assert caught_up["switch_on_to_first_result_ms"] == 50.0
    md = (tmp_path / "copy_check.md").read_text().splitlines()
    assert (
        "Copy model: next = seq[-9] + 1 (mod 4096); the lag draft reads its own KV 8 back (steady "
        "accept length 3.4 predicted; without the catch-up results 0-7 at 1.0, 19.2 tokens lost)."
    ) in md
    assert "| plain_k384 | 2 | 1.0 | 1.333 | 3.0 | 3.0 | - | 3.0 | 7.0 | 20.0 | 10.0 |" in md
    assert "| plain_k384c | 2 | 3.0 | 3.0 | 3.0 | 3.0 | - | 3.0 | 0.0 | 50.0 | 10.0 |" in md
    assert (
        "The catch-up (plain_k384c against plain_k384): 7.00 tokens a request regained in the "
        "first 40 results after a switch on; +30.00 ms from switch on to the first speculative "
        "result."
    ) in md
