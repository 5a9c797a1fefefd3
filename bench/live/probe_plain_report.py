#!/usr/bin/env python3
"""The phases of a probe_release.sh run and the plain off state's part of its report.

probe_release.sh marks, before each phase of a server (``serial``, ``burst``, ``load``) and after
the last (``end``), how many lines the server's log held and whether its process lived:
``{"label", "phase", "log_lines", "alive"}`` in results.jsonl. Cut at those marks, the log says
per phase what the hook decided (``sgtrace-hook toggle``) and applied (``sgtrace-hook switched``,
the plain off state), whether SGLang's idle memory self-check found a leak (it logs
``memory leak detected`` and, strict by default, raises: the server then dies), and whether the
server crashed. A passing self-check logs nothing: "no leak" is the absence of that line with
the server alive after the phase, when it had gone idle (probe_release.sh waits a second).

Imported by probe_release_report.py (stdlib only, runs on the GPU machine).
"""

from __future__ import annotations

import re

PHASES = ("serial", "burst", "load", "end")
TOGGLE_SPEC = re.compile(r"sgtrace-hook toggle step=\d+ .*? spec=(on|off) ")
SWITCHED = re.compile(r"sgtrace-hook switched spec=(on|off) \(plain off state\): (\d+) running")
LEAK = "memory leak detected"
PLAIN_ATTACHED = "(off = plain decode"
PLAIN_READY = "sgtrace-hook plain off state ready"
# the hook's own error and refusal lines (payload/hook.py, plainsites.py): none may show
HOOK_FAULTS = (
    "sgtrace-hook: disabled",
    "stopped deciding after an error",
    "the hook was generated for another release",
    "observe only",
    "without an EAGLEWorkerV2",
)


def phase_slices(lines: list[str], marks: list[dict]) -> dict[str, dict]:
    """Each marked phase's log lines and whether the server lived when the next mark was taken
    (None where no mark followed: the run stopped before)."""
    at = {m["phase"]: m for m in marks}
    out = {}
    for phase, nxt in zip(PHASES, PHASES[1:], strict=False):
        if phase not in at:
            continue
        following = next((at[p] for p in PHASES[PHASES.index(nxt) :] if p in at), None)
        end = following["log_lines"] if following else len(lines)
        out[phase] = {
            "lines": lines[at[phase]["log_lines"] : end],
            "alive_before": at[phase].get("alive", True),
            "alive_after": following.get("alive") if following else None,
        }
    return out


def first_traceback(lines: list[str]) -> list[str]:
    """The first traceback's exception line and innermost frame (SGLang prefixes dropped)."""
    clean = [re.sub(r"^\[[^\]]*\]\s*", "", x.rstrip()) for x in lines]
    start = next((i for i, x in enumerate(clean) if "Traceback (most recent call last)" in x), None)
    if start is None:
        return []
    frame = None
    for x in clean[start + 1 :]:
        if x.lstrip().startswith('File "'):
            frame = x.strip()
        elif x and not x.startswith(" "):
            return [x.strip()[:300]] + ([frame[:300]] if frame else [])
    return [clean[start]]


def phase_summary(lines: list[str], marks: list[dict]) -> dict[str, dict]:
    """Per phase: toggles (off, on), switches applied, requests retracted, leak lines, crash."""
    out = {}
    for phase, cut in phase_slices(lines, marks).items():
        chunk = cut["lines"]
        toggles = [m.group(1) for m in map(TOGGLE_SPEC.search, chunk) if m]
        switched = [m.groups() for m in map(SWITCHED.search, chunk) if m]
        out[phase] = {
            "toggles": len(toggles),
            "toggles_off": toggles.count("off"),
            "switches": len(switched),
            "switches_off": sum(1 for spec, _ in switched if spec == "off"),
            "retracted": sum(int(n) for _, n in switched),
            "leak_lines": sum(1 for x in chunk if LEAK in x),
            "tracebacks": sum(1 for x in chunk if "Traceback (most recent call last)" in x),
            "crashed": cut["alive_before"] is not False and cut["alive_after"] is False,
        }
    return out


def plain_hook_summary(lines: list[str]) -> dict:
    """What the plain off state's hook said at start-up, and its faults."""
    hook_lines = [x for x in lines if "sgtrace-hook" in x]
    return {
        "attached": any(PLAIN_ATTACHED in x for x in hook_lines),
        "graphs_ready": any(PLAIN_READY in x for x in hook_lines),
        "faults": [x.strip()[:300] for x in hook_lines if any(f in x for f in HOOK_FAULTS)][:6],
        "toggles": sum(1 for x in hook_lines if TOGGLE_SPEC.search(x)),
        "switches": sum(1 for x in hook_lines if SWITCHED.search(x)),
    }


def run_verdicts(name: str, s: dict) -> dict[str, bool]:
    """Crash, leak and requests of a server measured in phases; the plain hook's own checks."""
    v: dict[str, bool] = {}
    phases = s.get("phases") or {}
    if not phases:
        return v
    v[f"{name}_no_crash"] = not any(p["crashed"] for p in phases.values())
    v[f"{name}_no_traceback"] = not any(p["tracebacks"] for p in phases.values())
    v[f"{name}_no_leak"] = not any(p["leak_lines"] for p in phases.values())
    sent = sum(r.get("requests_sent") or 0 for r in s["load"])
    ok = sum(r.get("requests_ok") or 0 for r in s["load"])
    greedy_failed = sum(g["empty"] for g in s["greedy"].values())
    v[f"{name}_requests_all_ok"] = sent > 0 and ok == sent and greedy_failed == 0
    plain = s.get("plain")
    if plain is not None:
        v[f"{name}_plain_attached"] = (
            plain["attached"] and plain["graphs_ready"] and not plain["faults"]
        )
        v[f"{name}_switched"] = plain["switches"] >= 1
    return v


def plain_markdown(servers: dict[str, dict]) -> list[str]:
    """The table of the servers measured in phases (a plain off state run), one row each."""
    rows = [s for s in servers.values() if s.get("phases")]
    if not rows:
        return []
    out = [
        "",
        "## Measured in phases (greedy serial, burst, load): the plain off state",
        "",
        "| server | started | greedy = base serial | burst | toggles | switches (off) | "
        "c=1 | c=8 | c=32 | c=64 tok/s | requests ok | leak check | crash | errors |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | --- |",
    ]
    for name, s in servers.items():
        if not s.get("phases"):
            continue
        phases = s["phases"]
        by_c = {r["concurrency"]: r.get("tok_per_s") for r in s["load"]}
        ok = sum(r.get("requests_ok") or 0 for r in s["load"])
        sent = sum(r.get("requests_sent") or 0 for r in s["load"])
        g = s["greedy"]
        same = [
            f"{g[w]['n_identical']}/{g[w]['compared']}"
            if "n_identical" in g.get(w, {})
            else ("ref" if w in g else "-")
            for w in ("serial", "burst")
        ]
        leaks = [p for p, x in phases.items() if x["leak_lines"]]
        crashed = [p for p, x in phases.items() if x["crashed"]]
        plain = s.get("plain") or {}
        errors = list(s.get("first_traceback") or []) + plain.get("faults", [])
        cells = [
            name,
            s["status"],
            *same,
            str(sum(p["toggles"] for p in phases.values())),
            f"{sum(p['switches'] for p in phases.values())} "
            f"({sum(p['switches_off'] for p in phases.values())})",
            *[str(by_c.get(c, "")) for c in (1, 8, 32, 64)],
            f"{ok}/{sent}",
            ("LEAK in " + ", ".join(leaks)) if leaks else "no leak line",
            ("in " + ", ".join(crashed)) if crashed else "none",
            "<br>".join(f"`{e}`" for e in errors[:3]) or "-",
        ]
        out.append("| " + " | ".join(cells) + " |")
    out += ["", "Per phase (toggles / switches / requests retracted / leak lines):", ""]
    for name, s in servers.items():
        for phase, x in (s.get("phases") or {}).items():
            if x["toggles"] or x["switches"] or x["leak_lines"] or x["crashed"]:
                out.append(
                    f"- {name} {phase}: {x['toggles']} toggles ({x['toggles_off']} off), "
                    f"{x['switches']} switches, {x['retracted']} retracted, "
                    f"{x['leak_lines']} leak lines{', CRASHED' if x['crashed'] else ''}"
                )
    return out
