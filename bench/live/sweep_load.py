#!/usr/bin/env python3
"""Closed-loop load on local SGLang servers, by concurrency level, with token-id prompts.

For the synthetic pair of ``make_synth_models.py`` (greedy next token = previous + 1), so
prompts are random token ids sent as ``input_ids`` (no tokenizer in the way) and every request
asks for ``--max-new`` tokens (spread by ``--max-new-spread``) with ``ignore_eos``.

* ``--conc 1,2,4,...``: for each level, C workers send requests back to back. After
  ``--warmup-s`` (not counted: lets a speculation policy settle), ``--windows`` windows of
  ``--window-s`` each are measured. Requests stream (``--stream-interval``: SGLang sends the
  first token, every N-th and the last), so the client knows when each request's tokens
  arrived: a window counts the tokens that arrived inside it (linear between two chunks of a
  request). When the last window ends, the requests still running are given until each has
  sent a chunk past its end (``--tail-s`` at most) and then cancelled. With
  ``--stream-interval 0`` (no streaming) a request's tokens count in proportion to the part of
  its lifetime inside a window, queue and prefill included, and the level waits for every
  request. One JSON line per level: tokens/s per window (mean and spread), tokens per verify
  (``completion_tokens / spec_verify_ct``), latencies.
* ``--fixed N``: fixed work instead of time windows. A turn is one short request from each of
  the C workers at once (the warm-up: the server wakes, a policy settles), then the same C
  workers send N requests each back to back (no streaming); the rate is all their tokens over
  the time from the first sent to the last answered. Every server does exactly the same work
  (same prompts, same lengths), so no window catches requests in part: the noise left is the
  servers' own (``--warmup-s``, ``--window-s``, ``--windows``, ``--stream-interval`` unused).
  ``--fixed-batch``: each wave is one ``/generate`` call of the C prompts (sweep_fixed.py).
* ``--targets A=PORT,B=PORT`` (instead of ``--port``/``--label``) with ``--reps R``: the
  servers take turns at each level, R times, the order rotated each time (A B C, B C A, ...):
  servers compared at one level are measured minutes apart no more, so a drift of the machine
  falls on all of them alike. One line per (server, level, repeat), ``rep`` in it.
  ``--warmup-turns K``: first K such rounds at each level, recorded with ``"warmup": true``
  and ``rep`` 1-K..0, which reports leave out of the scores: the first turn at a batch size
  compiles the kernels of its shapes (JIT, shared by the servers of the call through its
  cache: the first server to reach a level pays them; live, EAGLE-3's first turn at 32
  requests ran 14-30% below its replica's) and holds a policy's first measurements there.
* ``--greedy``: a fixed prompt set, sent one at a time and then all at once; records the
  output ids and whether each equals the expected ``last + 1, last + 2, ...`` continuation.

Only talks to 127.0.0.1; stdlib + aiohttp (in SGLang's bundle). The connection pool has no
limit (aiohttp's default of 100 held the 128 level of calls 1-12 at 100 requests at once).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import statistics
import time

from sweep_fixed import fixed_level
from sweep_requests import follow, generate, new_tokens, prompt


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int)
    p.add_argument("--label")
    p.add_argument(
        "--targets",
        default="",
        metavar="LABEL=PORT,...",
        help="several servers taking turns at each level (instead of --port and --label)",
    )
    p.add_argument("--reps", type=int, default=1, help="turns of every server at each level")
    p.add_argument(
        "--warmup-turns",
        type=int,
        default=0,
        metavar="K",
        help="with --targets: K turns of every server at each level before its --reps, "
        'recorded with "warmup": true (rep 1-K..0) and not scored',
    )
    p.add_argument("--out", required=True, help="JSONL file to append to")
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--conc", default="1,2,4,8,16,32,64,128")
    p.add_argument("--warmup-s", type=float, default=1.5)
    p.add_argument("--window-s", type=float, default=2.5)
    p.add_argument("--windows", type=int, default=2)
    p.add_argument(
        "--stream-interval",
        type=int,
        default=32,
        metavar="N",
        help="stream, a chunk every N tokens (0: no streaming, tokens spread over lifetimes)",
    )
    p.add_argument(
        "--fixed",
        type=int,
        default=0,
        metavar="N",
        help="fixed work: each worker sends N requests a turn, rate = tokens / time to finish",
    )
    p.add_argument(
        "--fixed-tokens",
        type=int,
        default=0,
        metavar="T",
        help="fixed work: more requests a worker where a turn would make fewer than T new tokens",
    )
    p.add_argument(
        "--fixed-batch",
        action="store_true",
        help="fixed work: each wave one /generate call of all C prompts (one prefill batch)",
    )
    p.add_argument("--tail-s", type=float, default=1.0, help="most wait after the last window")
    p.add_argument("--settle-s", type=float, default=0.3, help="pause between two levels")
    p.add_argument("--prompt-len", type=int, default=64)
    p.add_argument("--max-new", type=int, default=128)
    p.add_argument(
        "--max-new-spread",
        type=float,
        default=0.0,
        metavar="F",
        help="each request asks for max_new * (1 + u), u uniform in [-F, F] from its seed: "
        "requests of one length, started together, finish together and keep the load in waves",
    )
    p.add_argument(
        "--greedy",
        type=int,
        default=0,
        metavar="N",
        help="instead of load: N fixed prompts, serial then as one burst",
    )
    p.add_argument("--tag", default="", help="free text stored with each line")
    a = p.parse_args(argv)
    a.targets = targets(a, p)
    return a


def targets(a, parser):
    """[(label, port)] from --targets, or the one of --label and --port."""
    if a.targets:
        try:
            pairs = [item.split("=") for item in a.targets.split(",")]
            return [(label, int(port)) for label, port in pairs]
        except ValueError:
            parser.error(f"--targets {a.targets!r}: expected LABEL=PORT,LABEL=PORT")
    if a.port is None or a.label is None:
        parser.error("give --port and --label, or --targets LABEL=PORT,...")
    return [(a.label, a.port)]


def cumulative(points, t):
    """Tokens arrived by time ``t``: linear between the (time, tokens) points, flat outside."""
    times = [p[0] for p in points]
    k = bisect.bisect_right(times, t)
    if k == 0:
        return 0.0
    if k == len(points):
        return float(points[-1][1])
    (t0, n0), (t1, n1) = points[k - 1], points[k]
    return n0 + (n1 - n0) * (t - t0) / (t1 - t0) if t1 > t0 else float(n1)


def in_window(start, end, lo, hi):
    """Fraction of [start, end] inside [lo, hi] (a request known only by its lifetime)."""
    span = end - start
    return max(0.0, min(end, hi) - max(start, lo)) / span if span > 0 else 0.0


def window_tokens(records, lo, hi):
    return sum(cumulative(r["points"], hi) - cumulative(r["points"], lo) for r in records)


async def level(session, a, label, port, conc, base_seed, rep=1):
    url = f"http://127.0.0.1:{port}"
    records, errors = [], []
    t0, wall0 = time.perf_counter(), time.time()
    stop_at = t0 + a.warmup_s + a.windows * a.window_s

    async def worker(w):
        n = 0
        while time.perf_counter() < stop_at:
            seed = base_seed + w * 100_000 + n
            n += 1
            rec = {"start": time.perf_counter(), "points": []}
            rec["points"].append((rec["start"], 0))
            records.append(rec)
            try:
                await follow(
                    session,
                    url,
                    prompt(seed, a.prompt_len, a.vocab),
                    new_tokens(seed, a.max_new, a.max_new_spread),
                    a.stream_interval,
                    rec,
                )
            except Exception as exc:  # recorded, the level goes on
                rec["failed"] = True
                errors.append(repr(exc)[:200])
                await asyncio.sleep(0.05)

    tasks = [asyncio.create_task(worker(w)) for w in range(conc)]
    if a.stream_interval:  # until every running request has told its tokens past the end
        await asyncio.sleep(max(0.0, stop_at - time.perf_counter()))
        give_up = stop_at + a.tail_s
        while time.perf_counter() < give_up and any(
            "end" not in r and "failed" not in r and r["points"][-1][0] < stop_at for r in records
        ):
            await asyncio.sleep(0.005)
        for task in tasks:
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    rates = []
    for k in range(a.windows):
        lo = t0 + a.warmup_s + k * a.window_s
        rates.append(window_tokens(records, lo, lo + a.window_s) / a.window_s)
    done = [r for r in records if "end" in r]
    tokens, verifies = sum(r["tokens"] for r in done), sum(r["verifies"] for r in done)
    lat = sorted(r["end"] - r["start"] for r in done)
    mean = statistics.fmean(rates) if rates else 0.0
    return {
        "label": label,
        "tag": a.tag,
        "rep": rep,
        "concurrency": conc,
        "tok_per_s": round(mean, 1),
        "window_tok_per_s": [round(r, 1) for r in rates],
        "spread_pct": round(100 * (max(rates) - min(rates)) / mean, 2) if mean else None,
        "requests": len(done),
        "cancelled": len(records) - len(done) - len(errors),
        "errors": len(errors),
        "error_sample": errors[:2],
        "tokens_per_verify": round(tokens / verifies, 3) if verifies else None,
        "lat_p50_s": round(lat[len(lat) // 2], 3) if lat else None,
        "wall_s": round(time.perf_counter() - t0, 2),
        "t_start": round(wall0, 3),
        "window_s": a.window_s,
        "windows": a.windows,
        "warmup_s": a.warmup_s,
        "stream_interval": a.stream_interval,
        "max_new": a.max_new,
        "max_new_spread": a.max_new_spread,
        "prompt_len": a.prompt_len,
    }


def turns(servers, reps):
    """(repeat, server) in the order they run at one level: every server once a repeat, the
    order rotated by one each repeat."""
    n = len(servers)
    return [(rep + 1, servers[(rep + k) % n]) for rep in range(reps) for k in range(n)]


async def greedy(session, a, label, url):
    prompts = [prompt(7_000 + i, 16 + i % 5, a.vocab) for i in range(a.greedy)]
    rows = []
    for mode in ("serial", "burst"):
        if mode == "serial":
            outs = [await generate(session, url, p, 48) for p in prompts]
        else:
            outs = await asyncio.gather(*(generate(session, url, p, 48) for p in prompts))
        for i, (p, js) in enumerate(zip(prompts, outs, strict=True)):
            ids = js.get("output_ids")
            if ids is None:  # older servers: read the word-level text back (w123 -> 123)
                ids = [int(w[1:]) for w in js.get("text", "").split() if w[1:].isdigit()]
            want = [(p[-1] + k) % a.vocab for k in range(1, len(ids) + 1)]
            rows.append(
                {
                    "label": label,
                    "pass": mode,
                    "prompt": i,
                    "output_ids": ids,
                    "expected": ids == want and len(ids) == 48,
                }
            )
    return rows


async def main(argv=None):
    import aiohttp  # in SGLang's bundle on the GPU machine; not needed to import this module

    a = parse_args(argv)
    timeout = aiohttp.ClientTimeout(total=300)
    connector = aiohttp.TCPConnector(limit=0)  # no pool limit: every worker its connection
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        if a.greedy:
            for label, port in a.targets:
                mine = await greedy(session, a, label, f"http://127.0.0.1:{port}")
                ok = sum(r["expected"] for r in mine)
                print(json.dumps({"label": label, "greedy_expected": f"{ok}/{len(mine)}"}))
                append(a.out, mine)
            return
        for i, conc in enumerate(int(c) for c in a.conc.split(",")):
            warm = [(rep - a.warmup_turns, t) for rep, t in turns(a.targets, a.warmup_turns)]
            for rep, (label, port) in warm + turns(a.targets, a.reps):
                run = fixed_level if a.fixed else level
                row = await run(session, a, label, port, conc, 1_000_000 * (i + 1), rep)
                if rep < 1:  # a warm-up turn: first shapes compiled, first decisions, unscored
                    row["warmup"] = True
                print(json.dumps(row), flush=True)
                append(a.out, [row])  # as it comes: a run cut short keeps what it measured
                await asyncio.sleep(a.settle_s)


def append(path, rows):
    with open(path, "a") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)


if __name__ == "__main__":
    asyncio.run(main())
