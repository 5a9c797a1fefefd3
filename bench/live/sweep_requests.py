"""The requests of the live benchmark's load (sweep_load.py, sweep_fixed.py): token-id prompts
seeded by number, their lengths, the ``/generate`` bodies, and one request followed as it
streams. Only talks to 127.0.0.1; stdlib + aiohttp's session passed in."""

from __future__ import annotations

import json
import random
import time


def prompt(seed, length, vocab):
    rng = random.Random(seed)
    return [rng.randrange(3, vocab) for _ in range(length)]


def new_tokens(seed, max_new, spread):
    """The request's max_new_tokens: ``max_new`` spread by up to ``spread`` either way."""
    if spread <= 0:
        return max_new
    return max(1, round(max_new * (1 + random.Random(-seed).uniform(-spread, spread))))


def body(ids, max_new, stream_interval=0):
    params = {"temperature": 0.0, "max_new_tokens": max_new, "ignore_eos": True}
    if stream_interval:
        params["stream_interval"] = stream_interval
    return {"input_ids": ids, "sampling_params": params, "stream": bool(stream_interval)}


async def generate(session, url, ids, max_new):
    """One request, the whole answer at once (the greedy check)."""
    async with session.post(url + "/generate", json=body(ids, max_new)) as resp:
        js = await resp.json(content_type=None)
        if resp.status != 200 or "meta_info" not in js:
            raise RuntimeError(f"HTTP {resp.status}: {str(js)[:200]}")
        return js


async def follow(session, url, ids, max_new, stream_interval, rec):
    """One request; ``rec["points"]`` gets (time, tokens so far) as the answer arrives,
    ``rec["end"]``, ``rec["tokens"]`` and ``rec["verifies"]`` when it is complete."""
    async with session.post(url + "/generate", json=body(ids, max_new, stream_interval)) as resp:
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {(await resp.text())[:200]}")
        last = None
        if stream_interval:
            async for raw in resp.content:
                line = raw.strip()
                if not line.startswith(b"data:") or line == b"data: [DONE]":
                    continue
                js = json.loads(line[5:])
                if "meta_info" not in js:
                    raise RuntimeError(f"stream: {str(js)[:200]}")
                rec["points"].append((time.perf_counter(), js["meta_info"]["completion_tokens"]))
                last = js
        else:
            last = await resp.json(content_type=None)
            if "meta_info" not in last:
                raise RuntimeError(f"HTTP {resp.status}: {str(last)[:200]}")
        if last is None:
            raise RuntimeError("the stream ended without an answer")
    mi = last["meta_info"]
    rec.update(
        end=time.perf_counter(),
        tokens=int(mi.get("completion_tokens", 0)),
        verifies=int(mi.get("spec_verify_ct") or 0),
    )
    if not stream_interval:  # known only at the end: spread over the whole lifetime
        rec["points"].append((rec["end"], rec["tokens"]))
