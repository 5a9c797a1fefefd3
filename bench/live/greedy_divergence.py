#!/usr/bin/env python3
"""Measure how far each server's greedy outputs agree with the no-speculation server's.

    python bench/live/greedy_divergence.py greedy.jsonl [--against eagle3] > divergence.md

Reads greedy_check.py's lines or sweep_load.py ``--greedy``'s (``greedy.jsonl``, or its
``greedy.jsonl.gz`` where only that is stored). For each server and pass: requests, requests
identical to base, tokens compared, tokens equal up to the first mismatch (the rest of a
request follows from a different prefix), and the median position of the first mismatch.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from stored_results import read_lines


def runs(lines: list[dict]) -> list[dict]:
    """One ``{label, pass, outputs}`` per server and pass, from either layout of greedy lines.

    greedy_check.py writes that already; sweep_load.py ``--greedy`` writes one line per prompt
    (``label``, ``pass``, ``prompt``, ``output_ids``) and a summary line without ``pass``.
    """
    whole = [line for line in lines if "outputs" in line]
    per_prompt: dict[tuple[str, str], dict[int, list[int]]] = {}
    for line in lines:
        if "output_ids" in line:
            per_prompt.setdefault((line["label"], line["pass"]), {})[line["prompt"]] = line[
                "output_ids"
            ]
    return whole + [
        {"label": label, "pass": mode, "outputs": [outs[i] for i in sorted(outs)]}
        for (label, mode), outs in per_prompt.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("greedy", type=Path)
    parser.add_argument("--against", default="base", help="the reference server (default: base)")
    args = parser.parse_args()
    rows = runs([json.loads(line) for line in read_lines(args.greedy) if line])
    reference = args.against
    base = {r["pass"]: r["outputs"] for r in rows if r["label"] == reference}
    print(f"Compared with `{reference}`.\n")
    print(
        "| server | pass | requests | identical | tokens | tokens before first mismatch | median first mismatch |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        if row["label"] == reference or row["pass"] not in base:
            continue
        firsts, same, total, before = [], 0, 0, 0
        for ours, ref in zip(row["outputs"], base[row["pass"]], strict=True):
            total += len(ref)
            first = next(
                (i for i, (a, b) in enumerate(zip(ours, ref, strict=False)) if a != b), None
            )
            if first is None and len(ours) == len(ref):
                same += 1
                before += len(ref)
            else:
                first = first if first is not None else min(len(ours), len(ref))
                firsts.append(first)
                before += first
        median = statistics.median(firsts) if firsts else "-"
        print(
            f"| {row['label']} | {row['pass']} | {len(row['outputs'])} | {same} | {total} | {before} | {median} |"
        )


if __name__ == "__main__":
    main()
