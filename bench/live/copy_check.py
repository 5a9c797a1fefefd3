#!/usr/bin/env python3
"""Exact greedy outputs on the copy model (``make_copy_model.py``), phase by phase, with the
server's KV use read back when each phase is over.

The copy model's next token is ``seq[-D] + 1 (mod V)``, decided by attention to an earlier
position with a wide margin, so every greedy output is known in advance: this compares each
output with that expectation token by token (any server, any batch, any kernel must produce it;
a KV entry lost, misplaced or read from another request does not).

Phases (``--phases``, comma-separated; prompts are random ids, seeded by phase and index, at
least ``D`` of them):

* ``serial``: 4 requests one after another, 128 new tokens each;
* ``burst``: 32 at once, 16 to 248 new tokens (the batch shrinks as they finish);
* ``load``: ``--requests`` at ``--conc`` in flight, 32-320 new tokens, one in five aborted after
  a random delay (``/abort_request``): an aborted request's output must be a prefix of the
  expectation (SGLang may answer an abort with one token past ``max_new_tokens``: counted as
  ``aborted_overshoot``, compared like the others), every other one the whole of it; a request
  answered in full more than ``MISSED_S`` after its abort was sent counts as ``aborts_missed``
  (the abort did not reach it) and fails the phase;
* ``storm``: ``load`` again and again while the next round (as long as the last) ends within
  ``--storm-s`` seconds.

After each phase it waits for the server to go idle and reads ``/get_load``: ``num_tokens``
(the KV tokens in use, radix-cached ones excluded) must be 0, as at the start. One JSON line per
phase goes to ``--out`` as soon as the phase is over. Only 127.0.0.1 is contacted. Stdlib only.

    copy_check.py --port 30000 --label base --vocab 4096 --offset 2 --out copy.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

# an aborted request answered in full this long after its abort was sent was not aborted: SGLang
# ends an aborted request at its next scheduler iteration (milliseconds on the copy model)
MISSED_S = 0.5


def post(port: int, path: str, body: dict, timeout_s: float) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        raw = response.read()
    return json.loads(raw) if raw.strip().startswith(b"{") else {}


def kv_in_use(port: int) -> tuple[int, int]:
    """(requests, KV tokens in use) of the server, summed over its data-parallel ranks."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/get_load", timeout=10) as response:
        loads = json.loads(response.read())
    return sum(x["num_reqs"] for x in loads), sum(x["num_tokens"] for x in loads)


def expected(prompt: list[int], max_new: int, offset: int, vocab: int) -> list[int]:
    seq = list(prompt)
    for _ in range(max_new):
        seq.append((seq[-offset] + 1) % vocab)
    return seq[len(prompt) :]


class Phase:
    """One phase's requests and tallies (thread-safe)."""

    def __init__(self, args: argparse.Namespace, name: str) -> None:
        self.args, self.name = args, name
        self.lock = threading.Lock()
        self.stats = {"requests": 0, "exact": 0, "aborted": 0, "aborted_prefix_ok": 0,
                      "aborted_overshoot": 0, "aborts_missed": 0, "tokens": 0,
                      "mismatch_count": 0,
                      "mismatches": [], "errors": []}  # fmt: skip
        self.fired_at: dict[str, float] = {}  # rid -> when its abort was sent

    def prompt(self, i: int) -> list[int]:
        """Random ids, 6 to 40 of them, at least ``--offset`` (the first token's source)."""
        rng = random.Random(f"{self.name}-{i}")
        length = rng.randrange(max(6, self.args.offset), 41)
        return [rng.randrange(3, self.args.vocab) for _ in range(length)]

    def one(self, i: int, max_new: int, abort_after: float | None = None) -> None:
        a = self.args
        prompt, rid = self.prompt(i), f"{a.label}-{self.name}-{i}-{time.monotonic_ns()}"
        body = {"input_ids": prompt, "rid": rid,
                "sampling_params": {"temperature": 0.0, "max_new_tokens": max_new,
                                    "ignore_eos": True}}  # fmt: skip
        fired = threading.Event()
        if abort_after is not None:
            timer = threading.Timer(abort_after, self.abort, (rid, fired))
            timer.start()
        try:
            reply = post(a.port, "/generate", body, a.timeout_s)
            answered = time.monotonic()
            out = [int(t) for t in reply["output_ids"]]
            reason = (reply.get("meta_info", {}).get("finish_reason") or {}).get("type")
        except urllib.error.HTTPError as exc:  # SGLang answers some aborts with an error status
            with self.lock:
                if fired.is_set():
                    self.stats["requests"] += 1
                    self.stats["aborted"] += 1
                else:
                    self.stats["errors"].append(f"{i}: {exc!r}"[:200])
            return
        except Exception as exc:  # a refused or hung request: counted, never raised
            with self.lock:
                self.stats["errors"].append(f"{i}: {exc!r}"[:200])
            return
        want = expected(prompt, max(max_new, len(out)), a.offset, a.vocab)
        with self.lock:
            s = self.stats
            s["requests"] += 1
            s["tokens"] += len(out)
            if reason == "abort":
                s["aborted"] += 1
                # seen live: an abort answered with one token past max_new_tokens (still right)
                s["aborted_overshoot"] += len(out) > max_new
                s["aborted_prefix_ok"] += out == want[: len(out)]  # also counted when empty
                if out != want[: len(out)]:
                    self.mismatch(i, out, want)
            elif out == want:
                s["exact"] += 1
            else:
                self.mismatch(i, out, want)
            if reason != "abort" and fired.is_set() and answered - self.fired_at[rid] > MISSED_S:
                s["aborts_missed"] += 1  # the server went on long after the abort reached it

    def mismatch(self, i: int, out: list[int], want: list[int]) -> None:
        pairs = enumerate(zip(out, want, strict=False))
        first = next((k for k, (x, y) in pairs if x != y), min(len(out), len(want)))
        if len(self.stats["mismatches"]) < 20:
            self.stats["mismatches"].append(
                {
                    "i": i,
                    "len": len(out),
                    "want_len": len(want),
                    "first": first,
                    "got": out[first : first + 6],
                    "want": want[first : first + 6],
                }  # fmt: skip
            )
        self.stats["mismatch_count"] += 1

    def abort(self, rid: str, fired: threading.Event) -> None:
        with self.lock:
            self.fired_at[rid] = time.monotonic()
        fired.set()
        try:
            post(self.args.port, "/abort_request", {"rid": rid}, 10)
        except Exception as exc:
            with self.lock:
                self.stats["errors"].append(f"abort {rid}: {exc!r}"[:200])

    def run_load(self, start: int) -> int:
        a, rng = self.args, random.Random(f"{self.name}-{start}")
        jobs = []
        for i in range(start, start + a.requests):
            abort = rng.uniform(0.02, 0.6) if rng.random() < 0.2 else None
            jobs.append((i, rng.randrange(32, 321), abort))
        with ThreadPoolExecutor(max_workers=a.conc) as pool:
            list(pool.map(lambda job: self.one(*job), jobs))
        return start + a.requests


def idle_kv(port: int, wait_s: float = 20.0) -> dict:
    """Wait for no request in the server, then the KV tokens still in use (must be 0)."""
    deadline, reqs, used = time.monotonic() + wait_s, -1, -1
    while time.monotonic() < deadline:
        reqs, used = kv_in_use(port)
        if reqs == 0 and used == 0:
            break
        time.sleep(0.25)
    return {"idle_requests": reqs, "idle_kv_tokens": used}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--label", required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--offset", type=int, required=True, help="D of the rule (1 to 40)")
    p.add_argument("--phases", default="serial,burst,load")
    p.add_argument("--conc", type=int, default=48)
    p.add_argument("--requests", type=int, default=160)
    p.add_argument("--storm-s", type=float, default=0.0)
    p.add_argument("--timeout-s", type=float, default=120.0)
    p.add_argument("--progress", default="", help="storm: a JSON line a round to this file")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    if not 1 <= a.offset <= 40:  # a prompt holds at most 40 ids
        p.error(f"--offset {a.offset}: 1 to 40")
    write(a.out, {"label": a.label, "phase": "start", **idle_kv(a.port, 5.0)})
    for name in a.phases.split(","):
        t0, phase = time.monotonic(), Phase(a, name)
        if name == "serial":
            for i in range(4):
                phase.one(i, 128)
        elif name == "burst":
            with ThreadPoolExecutor(max_workers=32) as pool:
                list(pool.map(phase.one, range(32), [16 + 8 * (i % 30) for i in range(32)]))
        elif name == "load":
            phase.run_load(0)
        elif name == "storm":
            nxt, rounds, took = 0, 0, 0.0
            while time.monotonic() - t0 + took < a.storm_s:  # the next round ends in time
                began = time.monotonic()
                nxt, rounds = phase.run_load(nxt), rounds + 1
                took = time.monotonic() - began
                if a.progress:  # a line a round: how far a long storm got, as it goes
                    done = {k: v for k, v in phase.stats.items() if k != "mismatches"}
                    write(a.progress, {"label": a.label, "round": rounds,
                                       "elapsed_s": round(time.monotonic() - t0, 1), **done})  # fmt: skip
            phase.stats["rounds"] = rounds
        else:
            raise SystemExit(f"unknown phase {name!r}: serial, burst, load or storm")
        line = {"label": a.label, "phase": name, "wall_s": round(time.monotonic() - t0, 1),
                **phase.stats, **idle_kv(a.port)}  # fmt: skip
        line["ok"] = (
            not line["errors"]
            and not line["mismatches"]
            and line["idle_kv_tokens"] == 0
            and line["exact"] + line["aborted"] == line["requests"]
            and line["aborts_missed"] == 0
        )
        write(a.out, line)  # at once: a run cut short keeps the phases it finished
        print(json.dumps({k: v for k, v in line.items() if k not in ("mismatches",)})[:600])


def write(path: str, line: dict) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
