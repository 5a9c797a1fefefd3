#!/usr/bin/env python3
"""Greedy outputs of a fixed prompt set from a local SGLang server, for token-by-token comparison.

One pass per call, greedy (temperature 0, ignore_eos):

* ``serial``: the first 4 prompts one after another, 64 new tokens each (concurrency 1): a
  default-policy hook with a draft that accepts nothing turns speculation off inside them;
* ``burst``: PROMPTS prompts sent at once, with max_new_tokens staggered from 16 to 88, so the
  decode batch shrinks from PROMPTS to 1 while the requests run: a batch-size hook turns
  speculation off at the start and back on as requests finish, inside the requests.

Appends ``{"label", "pass", "outputs": [[ids...], ...], "errors": [...]}`` as one JSON line to
--out. Only 127.0.0.1 is contacted. Stdlib only.

    greedy_check.py --port 30300 --label hook_bs --pass serial --out greedy.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import urllib.request
from concurrent.futures import ThreadPoolExecutor

PROMPTS = 24
WORDS = (
    "the of and to in is for on that with as by at from it this be are was or an which def "
    "return class import self value list dict print range if else while yield server model "
    "token batch draft verify accept speculative decode kernel"
).split()


def prompt(i: int) -> str:
    rng = random.Random(7_000 + i)
    return " ".join(rng.choice(WORDS) for _ in range(12 + (i % 9)))


def generate(port: int, text: str, max_new: int, timeout_s: float) -> list[int]:
    body = {
        "text": text,
        "sampling_params": {"temperature": 0.0, "max_new_tokens": max_new, "ignore_eos": True},
    }
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/generate",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        reply = json.loads(response.read())
    return [int(t) for t in reply["output_ids"]]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--pass", dest="which", choices=("serial", "burst"), required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--timeout-s", type=float, default=60.0)
    args = parser.parse_args()
    errors: list[str] = []

    def one(i: int, max_new: int) -> list[int]:
        try:
            return generate(args.port, prompt(i), max_new, args.timeout_s)
        except Exception as exc:  # recorded in the output, compared as a failure
            errors.append(f"prompt {i}: {exc!r}"[:300])
            return []

    if args.which == "serial":
        outputs = [one(i, 64) for i in range(4)]
    else:
        with ThreadPoolExecutor(max_workers=PROMPTS) as pool:
            outputs = list(pool.map(lambda i: one(i, 16 + 8 * (i % 10)), range(PROMPTS)))
    record = {"label": args.label, "pass": args.which, "outputs": outputs, "errors": errors}
    with open(args.out, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
    summary = {"label": args.label, "pass": args.which, "requests": len(outputs)}
    print(json.dumps({**summary, "tokens": sum(map(len, outputs)), "errors": errors}))


if __name__ == "__main__":
    main()
