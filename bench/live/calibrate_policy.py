#!/usr/bin/env python3
"""Derive the hook's policy for a deployment from a measured sweep (sweep.sh's sweep.jsonl).

The sgtrace policy decides from facts every rank sees alike (batch size, accept lengths), not
from clocks, so where speculation stops paying has to be measured once per model, draft and
machine. From the no-speculation server and an EAGLE-3 server with a good draft:

* ``r(c) = eagle3(c) / off(c)``, tokens/s at concurrency ``c`` (the mean over the sweeps
  given, where a level was measured more than once), where ``off`` is what the
  server does with speculation switched off: no speculation at all (``--off base``, the
  default; the hook's off, SGLang's plain decode path, costs 0.99-1.00x of it), or a server
  measured with the hook held off (``--off plainoff-high``);
* ``on_below``: the largest level up to which EAGLE-3 wins at every level (``r >= 1``);
  ``off_above``: where ``r`` crosses 1 between that level and the next, interpolated linearly
  in ``log c`` and ``log r`` (rounded up; the next level when nothing is measured beyond). The
  band between them is the hysteresis;
* ``on_delay_steps`` (32, not measured): how long the batch size must stay at or below
  ``on_below`` before speculation turns on again;
* ``min_accept_length``: the accept length at which EAGLE-3 breaks even at concurrency 1,
  ``accept(1) / r(1)`` (a step of EAGLE-3 costs that many plain steps), so a draft that
  accepts less is switched off at any load by the acceptance gate.

Usage: calibrate_policy.py SWEEP.jsonl... [--off base] [--spec eagle3-high] [-o policy.json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from stored_results import read_lines

QUIET = {"probe_interval_steps": 2048, "probe_steps": 16, "min_accept_samples": 16}
# Not measured by a sweep: about 0.1-0.2 s of decode steps, longer than a loaded server's dips
# between two waves of requests, short next to a quiet spell.
ON_DELAY = {"on_delay_steps": 32}


def rates(rows, label):
    """``{concurrency: {tok_per_s, tokens_per_verify}}`` of ``label``, the mean of its runs."""
    runs: dict[int, list[dict]] = {}
    for r in rows:
        if r.get("label") == label and "concurrency" in r:
            runs.setdefault(r["concurrency"], []).append(r)
    return {
        c: {key: mean(rs, key) for key in ("tok_per_s", "tokens_per_verify")}
        for c, rs in runs.items()
    }


def mean(rows, key):
    values = [r[key] for r in rows if r.get(key) is not None]
    return sum(values) / len(values) if values else None


def crossover(low: int, high: int, ratio: dict) -> int:
    """The batch size where ``ratio`` crosses 1 between levels ``low`` (won) and ``high``."""
    if low < 1 or ratio[high] <= 0:
        return high
    won, lost = math.log(ratio[low]), math.log(ratio[high])
    share = won / (won - lost) if won > lost else 1.0
    return min(high, math.ceil(math.exp(math.log(low) + share * math.log(high / low))))


def calibrate(rows, base_label, spec_label, max_batch):
    base, spec = rates(rows, base_label), rates(rows, spec_label)
    if not base:
        raise SystemExit(f"no sweep rows labelled {base_label!r}")
    levels = sorted(set(base) & set(spec))
    if not levels:
        raise SystemExit(f"no concurrency level measured for both {base_label} and {spec_label}")
    ratio = {c: spec[c]["tok_per_s"] / base[c]["tok_per_s"] for c in levels}
    on_below = 0
    for c in levels:
        if ratio[c] < 1.0:
            break
        on_below = c
    later = [c for c in levels if c > on_below]
    off_above = crossover(on_below, later[0], ratio) if later else max_batch + 1
    accept = spec[levels[0]].get("tokens_per_verify")
    breakeven = round(accept / ratio[levels[0]], 3) if accept else None
    policy = {
        "kind": "threshold",  # the load rule with these thresholds
        "on_below": on_below,
        "off_above": max(off_above, on_below + 1),
        "min_accept_length": breakeven,
        **QUIET,
        **ON_DELAY,
    }
    evidence = {
        c: {"ratio": round(ratio[c], 3), "accept": spec[c].get("tokens_per_verify")} for c in levels
    }
    return policy, evidence


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sweep", type=Path, nargs="+", help="sweep.jsonl files (or their .gz)")
    p.add_argument("--off", default="base", help="label of the speculation-off server")
    p.add_argument("--spec", default="eagle3-high")
    p.add_argument("--max-batch", type=int, default=128)
    p.add_argument("-o", "--out", type=Path)
    a = p.parse_args()
    rows = [json.loads(line) for f in a.sweep for line in read_lines(f) if line]
    policy, evidence = calibrate(rows, a.off, a.spec, a.max_batch)
    print(json.dumps({"evidence": evidence}, indent=1), file=sys.stderr)
    text = json.dumps(policy, indent=2, sort_keys=True) + "\n"
    if a.out:
        a.out.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
