#!/usr/bin/env python3
"""Report of a probe_release.sh run: which servers of which release started, where each one that
did not stopped (the exception and the frame that raised it), greedy equality with the release's
plain server, tokens/s by concurrency, and what the sgtrace hook logged (it switches through
SGLang's plain decode path on every release: each toggle applied, switch lines logged, no fault).

Reads OUT/results.jsonl (ready records, load.py levels), OUT/greedy.jsonl (greedy_check.py),
LOGS/server_<name>.log and LOGS/imports_<tag>.log; writes OUT/probe_release.json and
OUT/probe_release.md. Stdlib only (runs on the GPU machine; with no inputs it writes an empty
report, which the dry run uses). Servers measured in phases (the plain off state's run:
``SERVERS=plain``) get a table of their own: toggles, switches, leak check, crashes, requests
answered (probe_plain_report.py).

    probe_release_report.py --out OUT --logs LOGS --names base013 eagle013 hook013
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from probe_plain_report import (
    HOOK_FAULTS,
    SWITCHED,
    first_traceback,
    phase_summary,
    plain_hook_summary,
    plain_markdown,
    run_verdicts,
)

TOGGLE = re.compile(
    r"sgtrace-hook toggle step=(\d+) rank=(-?\d+) batch_size=(\d+) spec=(on|off) "
    r"reason=([\w-]+)( applied=no)?"
)
EXC_LINE = re.compile(r"^(?:[\w.]+\.)?([A-Z]\w*(?:Error|Exception|Exit|Interrupt))(?::\s?(.*))?$")
FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
READY_LINE = "ready to roll"
COMPILE_ERROR = re.compile(r"\(\d+\): error|error: |fatal error")


def kind_and_tag(name: str) -> tuple[str, str]:
    """``eagle013`` -> (eagle, 013); ``plain_k2_013_nograph`` -> (plain, 013)."""
    base = name.removesuffix("_nograph")
    kind = base[:-3].rstrip("_")
    return ("plain" if kind.startswith("plain") else kind), base[-3:]


def reference(name: str, ready: dict[str, dict]) -> str:
    """Whose greedy outputs ``name``'s are compared with: ``base<tag>``, else the first base
    server of the same release (a variant's tag, 0.5.9's ``t09``, has no base of its own)."""
    _, tag = kind_and_tag(name)
    release = ready.get(name, {}).get("release")
    if f"base{tag}" in ready or release is None:
        return f"base{tag}"
    same = [n for n, r in ready.items() if r.get("kind") == "base" and r.get("release") == release]
    return (same or [f"base{tag}"])[0]


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def strip_prefix(line: str) -> str:
    """Drop SGLang's '[2026-... TP0] ' style prefixes so tracebacks read as Python wrote them."""
    return re.sub(r"^\[[^\]]*\]\s*", "", line.rstrip())


def where_it_stopped(lines: list[str]) -> dict | None:
    """The last traceback's exception and innermost frame, or an argparse/launcher error line."""
    clean = [strip_prefix(x) for x in lines]
    tbs = [i for i, x in enumerate(clean) if "Traceback (most recent call last)" in x]
    last_tb = tbs[-1] if tbs else None
    if last_tb is not None:
        frames, exc, end = [], None, len(clean)
        for k, x in enumerate(clean[last_tb + 1 :], start=last_tb + 1):
            m = FRAME.match(x)
            if m:
                frames.append(f"{m.group(1)}:{m.group(2)} in {m.group(3)}")
                continue
            e = EXC_LINE.match(x.strip())
            if e and not x.startswith(" "):
                exc, end = x.strip(), k + 1
                break
        # the first traceback's exception when chained ("During handling ...") is also telling
        first_tb = tbs[0]
        first_exc = None
        if first_tb != last_tb:
            for x in clean[first_tb + 1 :]:
                if EXC_LINE.match(x.strip()) and not x.startswith(" "):
                    first_exc = x.strip()
                    break
        sglang_frames = [
            f
            for f in frames
            if "/sglang/" in f or "/sgl_kernel/" in f or "/flashinfer/" in f or "sgtrace" in f
        ]
        return {
            "exception": exc,
            "raised_at": frames[-1] if frames else None,
            "last_sglang_frame": sglang_frames[-1] if sglang_frames else None,
            "first_exception": first_exc,
            "traceback_tail": clean[last_tb : last_tb + 1]  # + a multi-line message's rest
            + clean[max(last_tb + 1, end - 24) : end + 16],
            "error_lines": [x for x in clean if COMPILE_ERROR.search(x)][:8],
        }
    for x in reversed(clean):
        if re.search(r"error: |Error|FAILED|Killed|out of memory", x):
            return {
                "exception": x.strip()[:600],
                "raised_at": None,
                "last_sglang_frame": None,
                "first_exception": None,
                "traceback_tail": clean[-12:],
            }
    if not clean:
        return None
    keys = ("exception", "raised_at", "last_sglang_frame", "first_exception")
    return {**dict.fromkeys(keys), "traceback_tail": clean[-12:]}


def hook_summary(lines: list[str]) -> dict:
    toggles = []
    for x in lines:
        m = TOGGLE.search(x)
        if m:
            step, rank, size, spec, reason, observe = m.groups()
            toggles.append(
                {
                    "step": int(step),
                    "rank": int(rank),
                    "batch_size": int(size),
                    "spec": spec,
                    "reason": reason,
                    "applied": observe is None,
                }
            )
    hook_lines = [strip_prefix(x) for x in lines if "sgtrace" in x]
    errors = [x for x in hook_lines if "failed to install" in x or any(f in x for f in HOOK_FAULTS)]
    switches = sum(1 for x in lines if SWITCHED.search(x))
    return {
        "hook_log_lines": len(hook_lines),
        "first_lines": hook_lines[:6],
        "toggles": toggles[:40],
        "n_toggles": len(toggles),
        "switched_off": any(t["spec"] == "off" and t["applied"] for t in toggles),
        "all_applied": all(t["applied"] for t in toggles),
        "switch_lines": switches,
        "errors": errors[:6],
        "switches_ok": not errors
        and all(t["applied"] for t in toggles)
        and (switches >= 1 or not toggles),
    }


def greedy_compare(greedy: list[dict], name: str, ref: str) -> dict:
    out = {}
    runs = {(g["label"], g["pass"]): g for g in greedy}
    for which in ("serial", "burst"):
        mine, base = runs.get((name, which)), runs.get((ref, which))
        if not mine:
            continue
        rec = {
            "prompts": len(mine["outputs"]),
            "errors": mine.get("errors", [])[:3],
            "empty": sum(1 for o in mine["outputs"] if not o),
        }
        if base and name != ref:
            diffs, compared = [], 0
            for i, (a, b) in enumerate(zip(mine["outputs"], base["outputs"], strict=False)):
                if not b:  # the reference's request failed: nothing to compare with
                    continue
                compared += 1
                if a != b:
                    pos = next(
                        (k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                        min(len(a), len(b)),
                    )
                    diffs.append({"prompt": i, "first_diff_at": pos})
            rec["identical_to"] = ref
            rec["compared"] = compared
            rec["reference_failed"] = sum(1 for o in base["outputs"] if not o)
            rec["identical"] = not diffs and not rec["errors"] and rec["empty"] == 0
            rec["n_identical"] = compared - len(diffs)
            rec["differing_prompts"] = diffs[:8]
        out[which] = rec
    return out


LOAD_KEYS = (
    "concurrency",
    "requests_ok",
    "requests_sent",
    "tok_per_s",
    "lat_p50_s",
    "tokens_per_verify",
    "n_errors",
    "errors",
)


def read_imports(logs: Path) -> dict[str, dict]:
    """LOGS/imports_<tag>.log: the versions found and the modules that did not import."""
    out = {}
    for imp in sorted(logs.glob("imports_*.log")):
        text = imp.read_text(errors="replace").splitlines()
        out[imp.stem.split("_", 1)[1]] = {
            "dists": dict(
                x.split(" ", 2)[1:]
                for x in text
                if x.startswith("DIST ") and len(x.split(" ", 2)) == 3
            ),
            "failed": [x for x in text if x.startswith("IMPORT FAIL")],
            "ok": sum(1 for x in text if x.startswith("IMPORT OK")),
        }
    return out


def server_record(
    name: str,
    rec: dict,
    lines: list[str],
    loads: list[dict],
    greedy: list[dict],
    marks: list[dict],
    ref: str | None = None,
) -> dict:
    """One server: started or where it stopped, load levels, greedy against base<tag>, what its
    hook logged, and (measured in phases) toggles, leaks and crashes per phase."""
    kind, tag = kind_and_tag(name)
    kind = rec.get("kind") or kind
    at = rec.get("ready_at_s")
    status = (
        "ready"
        if isinstance(at, (int, float))
        else at
        if at in ("dead", "timeout")
        else "not started"
    )
    s = {
        "release": rec.get("release"),
        "kind": kind,
        "status": status,
        "ready_s": (at - rec["started_at_s"])
        if status == "ready" and isinstance(rec.get("started_at_s"), (int, float))
        else None,
        "log_lines": len(lines),
        "load": [{k: r.get(k) for k in LOAD_KEYS} for r in loads],
        "greedy": greedy_compare(greedy, name, ref or f"base{tag}"),
    }
    if status != "ready":
        s["stopped"] = where_it_stopped(lines)
    if kind == "hook":
        s["hook"] = hook_summary(lines)
    if kind in ("eagle", "hook", "plain"):
        s["spec_v2"] = any("EAGLEWorkerV2" in x or "spec v2" in x.lower() for x in lines)
    if marks:  # measured in phases; errors after the first mark
        s["phases"] = phase_summary(lines, marks)
        s["first_traceback"] = first_traceback(lines[marks[0]["log_lines"] :])
    if kind == "plain":
        s["plain"] = plain_hook_summary(lines)
    return s


def verdicts(servers: dict[str, dict]) -> dict[str, bool]:
    v: dict[str, bool] = {}
    for name, s in servers.items():
        v[f"{name}_ready"] = s["status"] == "ready"
        for which, g in s["greedy"].items():
            if "identical" in g:
                v[f"{name}_greedy_identical_{which}"] = g["identical"]
        if "hook" in s and s["status"] == "ready":
            v[f"{name}_switches"] = s["hook"]["switches_ok"]
            v[f"{name}_switched_off"] = s["hook"]["switched_off"]
        if s["status"] == "ready":
            v.update(run_verdicts(name, s))
    return v


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--logs", type=Path, required=True)
    ap.add_argument("--names", nargs="*", default=[])
    a = ap.parse_args()
    results = read_jsonl(a.out / "results.jsonl")
    greedy = read_jsonl(a.out / "greedy.jsonl")
    ready = {r["label"]: r for r in results if "ready_at_s" in r}
    report = {"servers": {}, "imports": read_imports(a.logs), "verdicts": {}}
    for name in a.names:
        logf = a.logs / f"server_{name}.log"
        lines = logf.read_text(errors="replace").splitlines() if logf.exists() else []
        report["servers"][name] = server_record(
            name,
            ready.get(name, {}),
            lines,
            [r for r in results if "concurrency" in r and r["label"] == name],
            greedy,
            [r for r in results if "phase" in r and r["label"] == name],
            reference(name, ready),
        )
    report["verdicts"] = verdicts(report["servers"])
    (a.out / "probe_release.json").write_text(json.dumps(report, indent=1) + "\n")
    (a.out / "probe_release.md").write_text(markdown(report))
    print(markdown(report))


def markdown(report: dict) -> str:
    out = ["# SGLang releases, live (probe_release.sh)", ""]
    out += [
        "| server | release | status | ready s | c=1 tok/s | c=8 tok/s | c=32 tok/s | "
        "c=64 tok/s | tokens/verify (c=8) | greedy = base (serial, burst) |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, s in report["servers"].items():
        by_c = {r["concurrency"]: r for r in s["load"]}
        tok = [str(by_c[c]["tok_per_s"]) if c in by_c else "" for c in (1, 8, 32, 64)]
        tpv = by_c.get(8, {}).get("tokens_per_verify") or ""
        g = s["greedy"]
        same = ", ".join(
            str(g[w].get("identical", "ref")) if w in g else "-" for w in ("serial", "burst")
        )
        out.append(
            f"| {name} | {s['release']} | {s['status']} | {s['ready_s'] or ''} | "
            f"{' | '.join(tok)} | {tpv} | {same} |"
        )
    out += plain_markdown(report["servers"])
    for name, s in report["servers"].items():
        if s.get("stopped"):
            st = s["stopped"]
            out += [
                "",
                f"## {name}: stopped",
                "",
                f"- exception: `{st.get('exception')}`",
                f"- raised at: `{st.get('raised_at')}`",
                f"- last sglang/kernel frame: `{st.get('last_sglang_frame')}`",
            ]
            if st.get("first_exception"):
                out.append(f"- first exception of the chain: `{st['first_exception']}`")
            if st.get("error_lines"):
                out += ["- compiler/launcher error lines:"]
                out += [f"  - `{x[:300]}`" for x in st["error_lines"]]
            out += ["", "```", *st.get("traceback_tail", []), "```"]
        if s.get("hook"):
            h = s["hook"]
            out += [
                "",
                f"## {name}: the hook",
                "",
                f"- first lines: {h['first_lines'][:2]}",
                f"- toggles logged: {h['n_toggles']} (switched off: {h['switched_off']}; all "
                f"applied: {h['all_applied']}); switch lines: {h['switch_lines']}; hook "
                f"errors: {h['errors']}",
            ]
            for t in h["toggles"][:8]:
                out.append(
                    f"  - step {t['step']} batch {t['batch_size']} -> {t['spec']} "
                    f"({t['reason']}, applied={t['applied']})"
                )
    if report["imports"]:
        out += ["", "## Imports (a separate process per release, while the servers started)", ""]
        for tag, imp in report["imports"].items():
            dists = ", ".join(f"{k} {v}" for k, v in imp["dists"].items())
            out.append(f"- {tag}: {imp['ok']} modules OK; {dists}")
            out += [f"  - {x[:400]}" for x in imp["failed"]]
    out += ["", "## Verdicts", ""]
    out += [f"- {k}: {v}" for k, v in report["verdicts"].items()]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
