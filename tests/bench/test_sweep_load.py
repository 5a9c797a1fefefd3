"""The load generator of the live benchmark (bench/live/sweep_load.py): its token accounting,
the turns servers take, and whole runs against stand-in servers (fake_sglang.py, real
processes over real HTTP)."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from tests.bench.test_live_sweep import LIVE, script

FAKE = Path(__file__).with_name("fake_sglang.py")


def test_streamed_tokens_count_where_they_arrived():
    load = script("sweep_load")
    # queued 1 s, first token at 1.0, 32 more by 1.5, the last 32 by 2.0
    streamed = {"points": [(0.0, 0), (1.0, 1), (1.5, 33), (2.0, 65)]}
    assert load.cumulative(streamed["points"], -1.0) == 0.0
    assert load.cumulative(streamed["points"], 1.25) == pytest.approx(17.0)
    assert load.cumulative(streamed["points"], 9.0) == 65.0
    assert load.window_tokens([streamed], 1.0, 2.0) == pytest.approx(64.0)
    # known only by its lifetime, the same request puts half its tokens in the queue's second
    whole = {"points": [(0.0, 0), (2.0, 65)]}
    assert load.window_tokens([whole], 1.0, 2.0) == pytest.approx(32.5)
    assert load.window_tokens([streamed, whole], 0.0, 2.0) == pytest.approx(130.0)


def test_servers_take_turns_in_a_rotated_order():
    turns = script("sweep_load").turns
    servers = [("a", 1), ("b", 2), ("c", 3)]
    order = [(rep, label) for rep, (label, _) in turns(servers, 2)]
    assert order == [(1, "a"), (1, "b"), (1, "c"), (2, "b"), (2, "c"), (2, "a")]


def test_targets_must_name_labels_and_ports(capsys):
    parse = script("sweep_load").parse_args
    assert parse(["--targets", "x=1,y=2", "--out", "o"]).targets == [("x", 1), ("y", 2)]
    assert parse(["--port", "5", "--label", "z", "--out", "o"]).targets == [("z", 5)]
    with pytest.raises(SystemExit):
        parse(["--targets", "x:1", "--out", "o"])
    assert "LABEL=PORT" in capsys.readouterr().err


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fake_servers():
    """Two stand-in servers: one token every 2 ms per request, and every 4 ms."""
    procs, ports = [], {}
    for label, token_s in (("fast", "0.002"), ("slow", "0.004")):
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, str(FAKE), str(port), token_s], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout.readline().strip() == "ready"
        procs.append(proc)
        ports[label] = port
    yield ports
    for proc in procs:
        proc.kill()
        proc.wait()


def run_load(tmp_path, ports, *args):
    out = tmp_path / "sweep.jsonl"
    targets = ",".join(f"{label}={port}" for label, port in ports.items())
    cmd = [sys.executable, str(LIVE / "sweep_load.py"), "--targets", targets, "--out", str(out)]
    subprocess.run(cmd + list(args), check=True, capture_output=True, timeout=120)
    return [json.loads(line) for line in out.read_text().splitlines()]


def stats(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=5) as resp:
        return json.load(resp)


def test_interleaved_streaming_sweep_measures_each_server(tmp_path, fake_servers):
    timing = ["--warmup-s", "1.0", "--window-s", "0.8", "--windows", "2", "--max-new", "64"]
    rows = run_load(
        tmp_path, fake_servers, "--conc", "2,128", "--reps", "2", "--stream-interval", "8", *timing
    )
    order = [(r["concurrency"], r["rep"], r["label"]) for r in rows]
    assert order == [
        (2, 1, "fast"),
        (2, 1, "slow"),
        (2, 2, "slow"),
        (2, 2, "fast"),
        (128, 1, "fast"),
        (128, 1, "slow"),
        (128, 2, "slow"),
        (128, 2, "fast"),
    ]
    assert all(r["errors"] == 0 and r["stream_interval"] == 8 for r in rows)
    two = {(r["label"], r["rep"]): r for r in rows if r["concurrency"] == 2}
    for rep in (1, 2):
        # 2 requests at once: 1000 and 500 tokens/s less the stand-in's own overhead
        fast, slow = two[("fast", rep)]["tok_per_s"], two[("slow", rep)]["tok_per_s"]
        assert 750 < fast <= 1010 and 380 < slow <= 505
        assert fast / slow == pytest.approx(2.0, rel=0.2)
        assert two[("fast", rep)]["tokens_per_verify"] == 2.0  # 64 over (64 + 1) // 2
    # more than 100 requests at once on a server: aiohttp's default pool (100), which would cap
    # both, is not in the way (the stand-in's count also holds cancelled requests not yet
    # noticed; on a loaded machine the fast one may finish requests before the last arrive)
    most = [stats(port)["most"] for port in fake_servers.values()]
    assert max(most) > 100, most


def test_without_streaming_the_level_waits_for_every_request(tmp_path, fake_servers):
    timing = ["--warmup-s", "0.2", "--window-s", "0.5", "--windows", "2", "--max-new", "32"]
    rows = run_load(tmp_path, fake_servers, "--conc", "4", "--stream-interval", "0", *timing)
    assert [r["label"] for r in rows] == ["fast", "slow"]
    assert all(r["cancelled"] == 0 and r["errors"] == 0 for r in rows)
    fast, slow = (r["tok_per_s"] for r in rows)
    assert 1400 < fast <= 2020 and fast / slow == pytest.approx(2.0, rel=0.2)


def test_fixed_work_times_the_same_requests_on_every_server(tmp_path, fake_servers):
    rows = run_load(
        tmp_path, fake_servers, "--conc", "1,8", "--reps", "2", "--fixed", "3", "--max-new", "40"
    )
    assert [(r["concurrency"], r["rep"]) for r in rows] == [
        (c, k) for c in (1, 8) for k in (1, 1, 2, 2)
    ]
    for r in rows:
        assert r["mode"] == "fixed" and r["errors"] == 0 and r["cancelled"] == 0
        # exactly the work asked: C workers x 3 requests x 40 tokens, warm-up not counted
        assert r["requests"] == 3 * r["concurrency"] and r["tokens"] == 120 * r["concurrency"]
        assert r["tok_per_s"] == pytest.approx(r["tokens"] / r["work_s"], rel=1e-3)
        assert r["window_tok_per_s"] == [r["tok_per_s"]]
    by = {(r["label"], r["concurrency"], r["rep"]): r["tok_per_s"] for r in rows}
    for conc in (1, 8):
        for rep in (1, 2):
            # each request of 40 tokens takes 80 ms (fast) or 160 ms (slow), three back to back
            fast, slow = by[("fast", conc, rep)], by[("slow", conc, rep)]
            assert 0.7 * 500 * conc < fast <= 505 * conc
            assert fast / slow == pytest.approx(2.0, rel=0.15)


def test_fixed_tokens_lengthen_the_turns_of_the_low_levels_only(tmp_path, fake_servers):
    """--fixed-tokens 120 with 40-token requests: three waves a turn at one request, one at
    four (160 tokens already); the rows say how many each worker sent."""
    rows = run_load(
        tmp_path, fake_servers, "--conc", "1,4", "--fixed", "1", "--fixed-tokens", "120",
        "--fixed-batch", "--max-new", "40",
    )  # fmt: skip
    waves = {r["concurrency"]: r["fixed_requests"] for r in rows}
    assert waves == {1: 3, 4: 1}
    for r in rows:
        assert r["errors"] == 0 and r["requests"] == waves[r["concurrency"]] * r["concurrency"]
        assert r["tokens"] == 40 * r["requests"]


def test_fixed_work_turns_send_new_prompts_each_turn_and_the_same_to_every_server(monkeypatch):
    load, fixed = script("sweep_load"), script("sweep_fixed")
    sent = []

    async def follow(session, url, ids, max_new, stream_interval, rec):
        sent.append((url, tuple(ids), max_new))
        rec.update(end=0.0, tokens=max_new, verifies=0)

    monkeypatch.setattr(fixed, "follow", follow)
    a = load.parse_args(["--port", "1", "--label", "x", "--out", "o", "--fixed", "2"])
    for port, rep in ((1, 1), (2, 1), (1, 2)):
        asyncio.run(fixed.fixed_level(None, a, "x", port, 3, 1_000_000, rep))
    turn = {}
    for url, ids, max_new in sent:
        if max_new != fixed.FIXED_WARMUP_TOKENS:
            turn.setdefault(url, []).append(ids)
    first, second = "http://127.0.0.1:1", "http://127.0.0.1:2"
    assert len(turn[first]) == 12 and len(turn[second]) == 6  # 3 workers x 2, per turn
    assert sorted(turn[first][:6]) == sorted(turn[second])  # same work on both servers
    assert not set(turn[first][:6]) & set(turn[first][6:])  # a new turn, new prompts


def test_fixed_batch_sends_each_wave_as_one_call_of_the_same_prompts(tmp_path, fake_servers):
    rows = run_load(
        tmp_path, fake_servers, "--conc", "16", "--fixed", "2", "--fixed-batch", "--max-new", "40"
    )
    assert [r["label"] for r in rows] == ["fast", "slow"]
    for r in rows:
        assert r["fixed_batch"] and r["errors"] == 0 and r["requests"] == 32
        assert r["tokens"] == 32 * 40 and r["tokens_per_verify"] == 2.0  # 40 over (40 + 1) // 2
    # per server: one warm-up call and two waves, each one call of 16 prompts
    assert [stats(port)["batches"] for port in fake_servers.values()] == [3, 3]
    fast, slow = (r["tok_per_s"] for r in rows)  # 2 waves of 40 tokens x 2 or 4 ms, 16 at once
    assert 0.7 * 16 * 500 < fast <= 16 * 505 and fast / slow == pytest.approx(2.0, rel=0.15)
    # the prompts are the unbatched mode's: the same seeds, so the same work
    load, fixed = script("sweep_load"), script("sweep_fixed")
    a = load.parse_args(["--port", "1", "--label", "x", "--out", "o", "--fixed", "2"])
    assert fixed.seeds_of(1_000_000, 3, 2, 1) == [1_002_001, 1_102_001, 1_202_001]
    assert a.fixed_batch is False
