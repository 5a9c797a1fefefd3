"""Fixed-work turns of the live benchmark (``sweep_load.py --fixed N``): every server times the
same requests, from the first sent to the last answered, so no window catches requests in part.

A turn is a warm-up wave of C short requests (the server wakes, a policy settles), then the C
workers' N requests each, back to back. With ``--fixed-batch`` each wave is ONE ``/generate``
call of C prompts instead of C calls: SGLang hands a batch of token-id prompts to the scheduler
as one message (``BatchTokenizedGenerateReqInput``), so the wave is prefilled in one batch
rather than in one or two by how the C calls happened to arrive (at 2-16 requests the waves of
fixed-work call 1 had two modes 30-50 ms apart, 1-3% of a wave).
"""

from __future__ import annotations

import asyncio
import time

from sweep_requests import body, follow, new_tokens, prompt

FIXED_WARMUP_TOKENS = 4  # each worker's warm-up request of a fixed-work turn


async def batch_wave(session, url, seeds, lengths, a):
    """One ``/generate`` call of a whole wave: the prompts of ``seeds``, each its length; the
    records of its requests (all answered together, when the last is done)."""
    bodies = [
        body(prompt(seed, a.prompt_len, a.vocab), n) for seed, n in zip(seeds, lengths, strict=True)
    ]
    payload = {
        "input_ids": [b["input_ids"] for b in bodies],
        "sampling_params": [b["sampling_params"] for b in bodies],
        "stream": False,
    }
    start = time.perf_counter()
    try:
        async with session.post(url + "/generate", json=payload) as resp:
            answers = await resp.json(content_type=None)
            if resp.status != 200 or not isinstance(answers, list) or len(answers) != len(seeds):
                raise RuntimeError(f"HTTP {resp.status}: {str(answers)[:200]}")
    except Exception as exc:  # recorded: the turn's work is then short, the row says so
        return [{"start": start, "failed": repr(exc)[:200]} for _ in seeds]
    end = time.perf_counter()
    return [
        {
            "start": start,
            "end": end,
            "tokens": int(js["meta_info"].get("completion_tokens", 0)),
            "verifies": int(js["meta_info"].get("spec_verify_ct") or 0),
        }
        for js in answers
    ]


def requests_at(fixed, fixed_tokens, conc, max_new):
    """Requests of each worker a turn at ``conc``: ``fixed``, or more where the turn would make
    fewer than ``fixed_tokens`` new tokens (a turn at one request is otherwise one short wave,
    0.2-0.7 s, and its noise a few percent).

    >>> [requests_at(1, 512, c, 128) for c in (1, 2, 4, 128)]
    [4, 2, 1, 1]
    """
    return max(fixed, -(-fixed_tokens // (conc * max_new)))


def seeds_of(base_seed, conc, rep, n):
    """The seeds of the n-th request of each of ``conc`` workers in turn ``rep``: new prompts
    each turn (no prefix cache hit), the same on every server."""
    return [base_seed + w * 100_000 + 1_000 * rep + n for w in range(conc)]


async def fixed_level(session, a, label, port, conc, base_seed, rep=1):
    """One fixed-work turn: a warm-up wave, then ``a.fixed`` requests from each of ``conc``
    workers (or ``a.fixed`` batch calls of ``conc`` prompts, ``a.fixed_batch``), more where
    ``a.fixed_tokens`` asks (:func:`requests_at`); the rate is their tokens over the time from
    the first sent to the last answered."""
    url = f"http://127.0.0.1:{port}"
    wall0 = time.time()
    warm_seeds = [base_seed - 1 - w for w in range(conc)]

    async def one(seed, max_new):
        rec = {"start": time.perf_counter(), "points": []}
        try:
            await follow(session, url, prompt(seed, a.prompt_len, a.vocab), max_new, 0, rec)
        except Exception as exc:  # recorded: the turn's work is then short, the row says so
            rec.update(failed=repr(exc)[:200])
        return rec

    def length(seed):
        return new_tokens(seed, a.max_new, a.max_new_spread)

    requests = requests_at(a.fixed, a.fixed_tokens, conc, a.max_new)
    wave_seeds = [seeds_of(base_seed, conc, rep, n) for n in range(requests)]

    async def batches():
        recs = []
        for seeds in wave_seeds:
            recs += await batch_wave(session, url, seeds, [length(s) for s in seeds], a)
        return recs

    async def worker(w):
        return [await one(seeds[w], length(seeds[w])) for seeds in wave_seeds]

    if a.fixed_batch:
        warm = await batch_wave(session, url, warm_seeds, [FIXED_WARMUP_TOKENS] * conc, a)
    else:
        warm = await asyncio.gather(*(one(seed, FIXED_WARMUP_TOKENS) for seed in warm_seeds))
    waves = [batches()] if a.fixed_batch else [worker(w) for w in range(conc)]
    t0 = time.perf_counter()
    records = [r for recs in await asyncio.gather(*waves) for r in recs]
    took = time.perf_counter() - t0
    done = [r for r in records if "end" in r]
    errors = [r["failed"] for r in records + warm if "failed" in r]
    tokens, verifies = sum(r["tokens"] for r in done), sum(r["verifies"] for r in done)
    rate = tokens / took if took > 0 else 0.0
    lat = sorted(r["end"] - r["start"] for r in done)
    return {
        "label": label,
        "tag": a.tag,
        "rep": rep,
        "concurrency": conc,
        "mode": "fixed",
        "fixed_requests": requests,
        "fixed_batch": bool(a.fixed_batch),
        "tok_per_s": round(rate, 1),
        "window_tok_per_s": [round(rate, 1)],  # one "window": the whole fixed work
        "tokens": tokens,
        "requests": len(done),
        "cancelled": 0,
        "errors": len(errors),
        "error_sample": errors[:2],
        "tokens_per_verify": round(tokens / verifies, 3) if verifies else None,
        "lat_p50_s": round(lat[len(lat) // 2], 3) if lat else None,
        "work_s": round(took, 4),
        "wall_s": round(time.time() - wall0, 2),
        "t_start": round(wall0, 3),
        "max_new": a.max_new,
        "max_new_spread": a.max_new_spread,
        "prompt_len": a.prompt_len,
    }
