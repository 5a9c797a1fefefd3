"""The tracer benchmark's results: the summary metrics, ``tracer.md`` and ``tracer.csv``.

Pure functions of the phase times the child processes of ``tracer_bench.py`` reported; the
fastest time per phase over processes is the estimate (other load only slows a run down).
"""

from __future__ import annotations

import json

from tracer_workload import RAISES, SELECTED_PER_STEP, UNITS


def summarize(samples, plan):
    """``{(python, backend): {metric: value}}`` from ``{(python, backend): [phase times]}``."""
    phase = {key: {p[0]: min(t[p[0]] for t in runs) for p in plan["phases"]}
             for key, runs in samples.items()}  # fmt: skip
    out = {}
    for (version, backend), times in phase.items():
        if backend == "untraced":
            continue
        base = phase[(version, "untraced")]
        row = {"us_per_call": (times["selected"] - base["selected"]) / SELECTED_PER_STEP * 1e6}
        row["unselected_pct"] = (times["unselected"] / base["unselected"] - 1) * 100
        row["ns_per_raise"] = (times["raises"] - base["raises"]) / RAISES * 1e9
        for units in UNITS:
            key = f"steps@{units}u"
            row[f"{key}_rate"] = 1 / base[key]
            row[f"{key}_pct"] = (times[key] / base[key] - 1) * 100
        out[(version, backend)] = row
    return phase, out


NOTES = """\
## Notes

- sys.monitoring (3.12+) costs unselected code nothing per call: PY_START/PY_RETURN are local
  events of the selected code objects. PY_UNWIND is not: CPython 3.12 and 3.13 refuse it (and
  RAISE, RERAISE, EXCEPTION_HANDLED, PY_THROW) in `set_local_events` ("invalid local event
  set"), so it is set globally and its callback runs for every frame an exception leaves, in
  all code: that is the ns/raise column, and what steps@Nu pays beyond 8 x µs/call here, where
  the unselected work raises 4 exceptions per 64 requests. Switching the global event on and
  off around selected calls would cost more: each `set_events` makes every code object
  re-instrument itself when next run.
- sys.setprofile (3.10/3.11, or `--backend profile`) calls its Python hook for every call and
  return, C calls included, of every function, and on 3.11 turns off the specialising
  interpreter while set: the unselected column. Only a backend that does not observe every
  call (sys.monitoring, or wrapping the selected functions) avoids that.
- µs/call includes `frame.f_locals`, which on 3.10 to 3.12 copies every local and raises and
  clears a KeyError per local not yet bound (most of them at entry); 3.13's proxy does not.
"""


def summary_table(summary):
    head = "| Python | backend | µs/call | unselected | ns/raise |"
    head += "".join(f" steps@{units}u |" for units in UNITS)
    lines = [head, "|---" * (5 + len(UNITS)) + "|"]
    for (version, backend), row in sorted(summary.items()):
        cells = [version, backend, f"{row['us_per_call']:.1f}", f"{row['unselected_pct']:+.1f}%"]
        cells.append(f"{row['ns_per_raise']:+.0f}")
        for units in UNITS:
            key = f"steps@{units}u"
            cells.append(f"{row[key + '_pct']:+.1f}% ({row[key + '_rate']:.0f}/s)")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def read_summary(path):
    """The summary rows of a ``tracer.csv`` written earlier (``--baseline``)."""
    summary = {}
    for line in path.read_text().splitlines()[1:]:
        version, backend, metric, value = line.split(",")
        if "s_per_step_" not in metric:
            summary.setdefault((version, backend), {})[metric] = float(value)
    return summary


def render(phase, summary, plan, context, baseline=None):
    lines = ["# Runtime tracer benchmark", ""]
    lines += [f"- {key}: {value}" for key, value in context.items()]
    lines += [
        "- µs/call: (traced - untraced) time of a step of 8 selected calls without other work,"
        " / 8: the cost of one recorded call (enter, extractors, JSON line, os.write)",
        "- unselected: slowdown of the unselected work alone (no selected call running)",
        "- ns/raise: added cost of one exception raised two frames below the code that catches"
        " it, in unselected code (sys.monitoring's PY_UNWIND is global: see the notes)",
        "- steps@Nu: slowdown of whole steps (8 selected calls + N units of unselected work; "
        "the untraced steps per second in brackets)",
        "",
    ]
    lines += summary_table(summary)
    if baseline:
        lines += ["", f"Before, from `{baseline[0]}` (same machine, an earlier run):", ""]
        lines += summary_table(baseline[1])
    lines += ["", "Fastest CPU time per step (or per unselected batch) by phase:", ""]
    names = [p[0] for p in plan["phases"]]
    lines += ["| Python | backend | " + " | ".join(names) + " |", "|---" * (2 + len(names)) + "|"]
    for (version, backend), times in sorted(phase.items()):
        cells = [version, backend] + [f"{times[name] * 1e6:.1f} µs" for name in names]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Phases (name, kind, work units, steps per round): " + json.dumps(plan), ""]
    lines += ["", NOTES]
    return "\n".join(lines)


def render_csv(samples, phase, summary):
    """Every process's times, the fastest per phase, and the summary metrics."""
    rows = ["python,backend,metric,value"]
    for (version, backend), runs in sorted(samples.items()):
        for number, times in enumerate(runs, start=1):
            rows += [f"{version},{backend},run{number}_s_per_step_{name},{value:.9f}"
                     for name, value in times.items()]  # fmt: skip
    for (version, backend), times in sorted(phase.items()):
        rows += [
            f"{version},{backend},s_per_step_{name},{value:.9f}" for name, value in times.items()
        ]
    for (version, backend), row in sorted(summary.items()):
        rows += [f"{version},{backend},{name},{value:.3f}" for name, value in row.items()]
    return "\n".join(rows) + "\n"
