#!/usr/bin/env python3
"""Closed-loop load on a local SGLang server, by concurrency level, with token-id prompts.

For the synthetic pair of ``make_synth_models.py`` (greedy next token = previous + 1), so
prompts are random token ids sent as ``input_ids`` (no tokenizer in the way) and every request
asks for ``--max-new`` tokens (spread by ``--max-new-spread``) with ``ignore_eos``.

* ``--conc 1,2,4,...``: for each level, C workers send requests back to back. After
  ``--warmup-s`` (not counted: lets a speculation policy settle), ``--windows`` windows of
  ``--window-s`` each are measured; a request's tokens count towards a window in proportion to
  the part of its lifetime inside the window. One JSON line per level: tokens/s per window
  (mean and spread), tokens per verify (``completion_tokens / spec_verify_ct``), latencies.
* ``--greedy``: a fixed prompt set, sent one at a time and then all at once; records the
  output ids and whether each equals the expected ``last + 1, last + 2, ...`` continuation.

Only talks to 127.0.0.1; stdlib + aiohttp (in SGLang's bundle).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--label", required=True)
    p.add_argument("--out", required=True, help="JSONL file to append to")
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--conc", default="1,2,4,8,16,32,64,128")
    p.add_argument("--warmup-s", type=float, default=1.5)
    p.add_argument("--window-s", type=float, default=2.5)
    p.add_argument("--windows", type=int, default=2)
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
    return p.parse_args()


def prompt(seed, length, vocab):
    rng = random.Random(seed)
    return [rng.randrange(3, vocab) for _ in range(length)]


def new_tokens(seed, max_new, spread):
    """The request's max_new_tokens: ``max_new`` spread by up to ``spread`` either way."""
    if spread <= 0:
        return max_new
    return max(1, round(max_new * (1 + random.Random(-seed).uniform(-spread, spread))))


async def generate(session, url, ids, max_new):
    body = {
        "input_ids": ids,
        "sampling_params": {"temperature": 0.0, "max_new_tokens": max_new, "ignore_eos": True},
    }
    async with session.post(url + "/generate", json=body) as resp:
        js = await resp.json(content_type=None)
        if resp.status != 200 or "meta_info" not in js:
            raise RuntimeError(f"HTTP {resp.status}: {str(js)[:200]}")
        return js


def in_window(start, end, lo, hi):
    """Fraction of [start, end] inside [lo, hi]."""
    span = end - start
    return max(0.0, min(end, hi) - max(start, lo)) / span if span > 0 else 0.0


async def level(session, a, url, conc, base_seed):
    done, errors = [], []
    t0 = time.perf_counter()
    stop_at = t0 + a.warmup_s + a.windows * a.window_s

    async def worker(w):
        n = 0
        while time.perf_counter() < stop_at:
            seed = base_seed + w * 100_000 + n
            ids = prompt(seed, a.prompt_len, a.vocab)
            n += 1
            start = time.perf_counter()
            try:
                js = await generate(
                    session, url, ids, new_tokens(seed, a.max_new, a.max_new_spread)
                )
            except Exception as exc:  # recorded, the level goes on
                errors.append(repr(exc)[:200])
                await asyncio.sleep(0.05)
                continue
            mi = js["meta_info"]
            done.append(
                (
                    start,
                    time.perf_counter(),
                    int(mi.get("completion_tokens", 0)),
                    int(mi.get("spec_verify_ct") or 0),
                )
            )

    await asyncio.gather(*(worker(w) for w in range(conc)))
    rates = []
    for k in range(a.windows):
        lo = t0 + a.warmup_s + k * a.window_s
        tokens = sum(tok * in_window(s, e, lo, lo + a.window_s) for s, e, tok, _ in done)
        rates.append(tokens / a.window_s)
    tokens, verifies = sum(d[2] for d in done), sum(d[3] for d in done)
    lat = sorted(e - s for s, e, _, _ in done)
    mean = statistics.fmean(rates) if rates else 0.0
    return {
        "label": a.label,
        "tag": a.tag,
        "concurrency": conc,
        "tok_per_s": round(mean, 1),
        "window_tok_per_s": [round(r, 1) for r in rates],
        "spread_pct": round(100 * (max(rates) - min(rates)) / mean, 2) if mean else None,
        "requests": len(done),
        "errors": len(errors),
        "error_sample": errors[:2],
        "tokens_per_verify": round(tokens / verifies, 3) if verifies else None,
        "lat_p50_s": round(lat[len(lat) // 2], 3) if lat else None,
        "wall_s": round(time.perf_counter() - t0, 2),
        "window_s": a.window_s,
        "windows": a.windows,
        "warmup_s": a.warmup_s,
        "max_new": a.max_new,
        "max_new_spread": a.max_new_spread,
        "prompt_len": a.prompt_len,
    }


async def greedy(session, a, url):
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
                    "label": a.label,
                    "pass": mode,
                    "prompt": i,
                    "output_ids": ids,
                    "expected": ids == want and len(ids) == 48,
                }
            )
    return rows


async def main():
    import aiohttp  # in SGLang's bundle on the GPU machine; not needed to import this module

    a = parse_args()
    url = f"http://127.0.0.1:{a.port}"
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        if a.greedy:
            rows = await greedy(session, a, url)
            ok = sum(r["expected"] for r in rows)
            print(json.dumps({"label": a.label, "greedy_expected": f"{ok}/{len(rows)}"}))
        else:
            rows = []
            for i, conc in enumerate(int(c) for c in a.conc.split(",")):
                row = await level(session, a, url, conc, 1_000_000 * (i + 1))
                print(json.dumps(row), flush=True)
                rows.append(row)
    with open(a.out, "a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
