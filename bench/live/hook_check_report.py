#!/usr/bin/env python3
"""Verdict of a hook_check.sh run: toggles, switches applied, greedy equality, throughput.

Reads OUT/results.jsonl (load.py levels, server ready times, phase marks), OUT/greedy.jsonl
(greedy_check.py) and LOGS/server_<label>.log; writes OUT/hook_check.json and OUT/hook_check.md.
Stdlib only (runs on the GPU machine).

Checks (each true/false, with the evidence):
* hook_bs_on_at_c1: no toggle and no runtime-state switch while the serial (concurrency 1) pass ran;
* hook_bs_off_under_load / hook_bs_back_on: in the burst and in the load phase, an OFF toggle at a
  batch size >= 16, and the phase's last toggle is ON;
* hook_default_off_at_c1: an OFF toggle with reason low-acceptance at batch size 1 in the serial pass;
* *_switches_applied: the hook's toggles were switched: "sgtrace-hook switched spec=..." log
  lines (the running requests retracted and the scheduler flipped to or from SGLang's plain
  decode path), at least one and no more than the toggles, and nothing failed;
* greedy_identical[<label>]: every greedy output of the server equals base's, token for token.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

TOGGLE = re.compile(
    r"sgtrace-hook toggle step=(\d+) rank=(-?\d+) batch_size=(\d+) spec=(on|off) "
    r"reason=([\w-]+)( applied=no)?"
)
SWITCH = re.compile(r"sgtrace-hook switched spec=(on|off) \(plain off state\): (\d+) running")
LABELS = ("base", "eagle3", "adaptive", "hook_bs", "hook_default")
PHASES = ("serial", "burst", "load", "end")


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def phase_events(lines: list[str], marks: dict[str, int]) -> dict[str, dict]:
    """Toggles and state switches of each phase, sliced by the log line counts in ``marks``."""
    out = {}
    for phase, nxt in zip(PHASES, PHASES[1:], strict=False):
        if phase not in marks:
            continue
        chunk = lines[marks[phase] : marks.get(nxt, len(lines))]
        toggles = []
        for line in chunk:
            m = TOGGLE.search(line)
            if m:
                step, rank, size, spec, reason, observe = m.groups()
                toggles.append(
                    {"step": int(step), "rank": int(rank), "batch_size": int(size),
                     "spec": spec, "reason": reason, "applied": observe is None}
                )  # fmt: skip
        switches = [  # [spec, running requests retracted]
            [spec, int(n)]
            for spec, n in (SWITCH.search(x).groups() for x in chunk if SWITCH.search(x))
        ]
        out[phase] = {"toggles": toggles, "switches": switches}
    return out


def greedy_compare(greedy: list[dict], labels: tuple[str, ...] = LABELS) -> dict[str, dict]:
    by = {(g["label"], g["pass"]): g for g in greedy}
    result = {}
    for label in labels[1:]:
        passes = {}
        for which in ("serial", "burst"):
            mine, base = by.get((label, which)), by.get(("base", which))
            if mine is None or base is None:
                passes[which] = {"compared": False}
                continue
            diffs = []
            for i, (a, b) in enumerate(zip(mine["outputs"], base["outputs"], strict=False)):
                if a != b:
                    first = next(
                        (k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                        min(len(a), len(b)),
                    )
                    diffs.append({"prompt": i, "first_mismatch": first, "len": [len(a), len(b)]})
            ok = not diffs and not mine["errors"] and not base["errors"]
            passes[which] = {"compared": True, "identical": ok, "mismatches": diffs,
                             "errors": mine["errors"] + base["errors"]}  # fmt: skip
        result[label] = passes
    return result


def hook_verdicts(events: dict[str, dict], log_text: dict[str, str]) -> dict[str, bool]:
    v: dict[str, bool] = {}
    bs = events.get("hook_bs", {})
    if bs:
        serial = bs.get("serial", {"toggles": [1], "switches": [1]})
        v["hook_bs_on_at_c1"] = not serial["toggles"] and not serial["switches"]
        for phase in ("burst", "load"):
            t = bs.get(phase, {}).get("toggles", [])
            v[f"hook_bs_off_under_load_{phase}"] = any(
                x["spec"] == "off" and x["batch_size"] >= 16 for x in t
            )
            v[f"hook_bs_back_on_{phase}"] = bool(t) and t[-1]["spec"] == "on"
    default = events.get("hook_default", {})
    if default:
        t = default.get("serial", {}).get("toggles", [])
        v["hook_default_off_at_c1"] = any(
            x["spec"] == "off" and x["reason"] == "low-acceptance" and x["batch_size"] == 1
            for x in t
        )
    for label in ("hook_bs", "hook_default"):
        if label not in events:
            continue
        toggles = [x for p in events[label].values() for x in p["toggles"]]
        switches = [s for p in events[label].values() for s in p["switches"]]
        text = log_text.get(label, "")
        v[f"{label}_switches_applied"] = (
            "sgtrace-hook attached" in text
            and "stopped deciding after an error" not in text
            and "sgtrace-hook: disabled" not in text
            and all(x["applied"] for x in toggles)
            and len(switches) >= 1
            and len(switches) <= len(toggles)
        )
    return v


def throughput_table(
    results: list[dict], labels: tuple[str, ...] = LABELS
) -> tuple[list[str], dict[str, dict[int, float]]]:
    table: dict[str, dict[int, float]] = {}
    for r in results:
        if "concurrency" in r and r.get("tok_per_s") is not None:
            table.setdefault(r["label"], {}).setdefault(r["concurrency"], r["tok_per_s"])
    rows = [
        "| server | ready s | c=1 tok/s | c=8 tok/s | c=64 tok/s |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    ready = {r["label"]: r["server_ready_s"] for r in results if "server_ready_s" in r}
    for label in labels:
        levels = table.get(label, {})
        cells = [str(levels.get(c, "-")) for c in (1, 8, 64)]
        rows.append(f"| {label} | {ready.get(label, '-')} | " + " | ".join(cells) + " |")
    return rows, table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--logs", type=Path, required=True)
    parser.add_argument("--labels", default=",".join(LABELS), help="servers, base first")
    args = parser.parse_args()
    labels = tuple(args.labels.split(","))
    results = read_jsonl(args.out / "results.jsonl")
    marks: dict[str, dict[str, int]] = {}
    for r in results:
        if "phase" in r:
            marks.setdefault(r["label"], {})[r["phase"]] = r["log_lines"]
    events, log_text = {}, {}
    for label in labels:
        path = args.logs / f"server_{label}.log"
        if path.exists():
            text = path.read_text(errors="replace")
            log_text[label] = text
            if label != "base" and label in marks:
                events[label] = phase_events(text.splitlines(), marks[label])
    greedy = greedy_compare(read_jsonl(args.out / "greedy.jsonl"), labels)
    verdicts = hook_verdicts(events, log_text)
    for label, passes in greedy.items():
        for which, g in passes.items():
            if g["compared"]:
                verdicts[f"greedy_identical_{label}_{which}"] = g["identical"]
    rows, table = throughput_table(results, labels)
    report = {"verdicts": verdicts, "events": events, "greedy": greedy, "throughput": table}
    (args.out / "hook_check.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    md = ["# sgtrace hook, live check on SGLang 0.5.16 (tiny random EAGLE-3 pair, one H200)", ""]
    md += rows + ["", "| check | result |", "| --- | --- |"]
    md += [f"| {k} | {'PASS' if ok else 'FAIL'} |" for k, ok in sorted(verdicts.items())]
    md += ["", "Toggles per phase (hook servers):", ""]
    for label, phases in events.items():
        for phase, ev in phases.items():
            shown = ", ".join(
                f"{t['spec']}@{t['step']}(bs={t['batch_size']},{t['reason']})"
                for t in ev["toggles"]
            )
            md.append(
                f"- {label} {phase}: {shown or 'none'}; state switches {ev['switches'] or 'none'}"
            )
    (args.out / "hook_check.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
