"""Benchmark the runtime tracer: cost per recorded call, and cost on everything not selected.

A fake SGLang scheduler (``tracer_workload.py``, imported in a child process) runs a step
loop shaped like SGLang's EAGLE v2 decode path: 8 selected calls per step, around a few
hundred unselected calls per work unit, a quarter of them in a second thread.
The child runs three phases and prints their times:

* ``selected``: steps without unselected work: (traced - untraced) / 8 is the cost of one
  recorded call (enter + exit: frame, extractors, JSON line, ``os.write``);
* ``unselected``: the unselected work alone, outside any selected call: what the tracer costs
  code it does not record (the profile backend's hook; sys.monitoring's global events);
* ``steps@Nu``: whole steps with N units of unselected work (20, 100, 400: from about
  2000 to 50 steps per second untraced, depending on the machine).

Each configuration (a Python, untraced or traced with one backend) runs in real processes
through the same bootstrap directory ``sgtrace trace`` uses (``prepare_trace_dir`` +
``traced_environment``: ``sitecustomize`` installs the plugin); configurations are
interleaved, ``--repeats`` processes each; a process reports the fastest of its rounds per
phase and the tables show the fastest over processes (other load only ever slows a run down,
so the fastest is the best estimate of the cost; the CSV keeps every process). Times are CPU time of the process (both
threads), not wall time: on a shared machine, waiting for a core is not the tracer's cost. Every traced run's trace is loaded back
and its call count checked. Results go to ``bench/results/tracer.md`` and ``tracer.csv`` (``tracer_report.py``)::

    python bench/tracer_bench.py                      # Pythons 3.12+ and 3.10/3.11 from pyenv
    python bench/tracer_bench.py --repeats 5 --python /usr/bin/python3.12
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tracer_report import read_summary, render, render_csv, summarize
from tracer_workload import REQS, SELECTED_PER_STEP, make_plan

BENCH_DIR = Path(__file__).resolve().parent
NAMES = {  # role -> method of the fake scheduler, as the built-in selection's roles
    "step": "Scheduler.run_batch",
    "decode_result": "BatchResultProcessor.process_batch_result_decode",
    "spec_forward": "SpecWorker.forward_batch_generation",
    "draft": "DraftWorker.draft",
    "draft_forward": "DraftWorker.draft_forward",
    "verify": "SpecWorker.verify",
    "draft_extend_decode": "DraftWorker._draft_extend_for_decode",
    "target_forward": "TargetWorker.forward_batch_generation",
}


def bench_selection():
    """The fake scheduler's methods by role, with the built-in selection's extractors."""
    from sgtrace.names import QualName
    from sgtrace.tracer.events import Role
    from sgtrace.tracer.selection import default_selection

    return default_selection(
        {Role(role): [QualName("tracer_workload", name)] for role, name in NAMES.items()}
    )


def python_version(python):
    code = "import sys; print('%d.%d.%d' % sys.version_info[:3])"
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def default_pythons():
    """This Python, plus a 3.12+ (for sys.monitoring) from PATH or pyenv if this is older."""
    found = [sys.executable]
    if sys.version_info < (3, 12):
        pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
        names = [f"python3.{minor}" for minor in range(12, 16)]
        names += [str(p) for p in sorted(pyenv.glob("3.1[2-9]*/bin/python"))]
        for name in names:
            if python_version(name) is not None:
                found.append(name)
                break
    return found


def run_child(python, plan, trace_dir, backend, plugin=None):
    """One child process, untraced (``backend`` None) or traced; returns its phase times.
    ``plugin``: another version of the payload package (``src/sgtrace/payload``) to run."""
    from sgtrace.tracer.launch import prepare_trace_dir, traced_environment

    env = {**os.environ, "PYTHONPATH": str(BENCH_DIR)}
    if backend is not None:
        prepare_trace_dir(trace_dir, bench_selection(), backend=backend)
        if plugin is not None:
            shutil.rmtree(trace_dir / "sgtrace_payload")
            shutil.copytree(plugin, trace_dir / "sgtrace_payload")
        env = traced_environment(trace_dir, env)
    script = "import json, sys, tracer_workload; tracer_workload.child(json.loads(sys.argv[1]))"
    command = [python, "-c", script, json.dumps(plan)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or done.stderr.strip():
        raise SystemExit(f"{' '.join(command[:3])} failed:\n{done.stderr}")
    return json.loads(done.stdout)


def check_trace(trace_dir, plan):
    """Every selected call of the step phases was recorded, with its facts."""
    from sgtrace.tracer.load import load_trace

    trace = load_trace(trace_dir)
    steps = sum((s // 10 or 1) + plan["rounds"] * s for _, k, _, s in plan["phases"] if k == "step")
    expected = SELECTED_PER_STEP * steps
    sizes = {e.facts.batch_size for e in trace.events if e.role.value != "draft_forward"}
    if len(trace.events) != expected or sizes != {REQS} or trace.notes:
        raise SystemExit(
            f"{trace_dir}: {len(trace.events)} calls recorded, expected {expected}; batch "
            f"sizes {sizes}; notes {[n.text for n in trace.notes]}"
        )
    return trace.processes[0].backend.value


def _at_least(version, major, minor):
    return tuple(int(part) for part in version.split(".")[:2]) >= (major, minor)


def main():
    from sgtrace.tracer.events import Backend

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", action="append", help="a Python to run (repeatable)")
    parser.add_argument("--repeats", type=int, default=3, help="processes per configuration")
    parser.add_argument("--results", type=Path, default=BENCH_DIR / "results")
    parser.add_argument(
        "--baseline", type=Path, help="a tracer.csv of an earlier run, shown as 'before'"
    )
    parser.add_argument(
        "--plugin",
        type=Path,
        help="run this payload package instead of sgtrace's src/sgtrace/payload (before/after "
        "comparisons: git archive REV src/sgtrace/payload | tar -x -C old)",
    )
    args = parser.parse_args()
    pythons = args.python or default_pythons()
    versions = {python: python_version(python) for python in pythons}
    plan = make_plan()
    configs = []
    for python, version in versions.items():
        backends = [Backend.PROFILE] + ([Backend.MONITORING] if _at_least(version, 3, 12) else [])
        configs += [(python, version, None)] + [(python, version, b) for b in backends]
    samples = {}
    with tempfile.TemporaryDirectory() as scratch:
        for repeat in range(args.repeats):
            for number, (python, version, backend) in enumerate(configs):
                name = "untraced" if backend is None else backend.value
                trace_dir = Path(scratch) / f"{repeat}-{number}"
                times = run_child(python, plan, trace_dir, backend, args.plugin)
                if backend is not None and check_trace(trace_dir, plan) != name:
                    raise SystemExit(f"{trace_dir}: recorded with another backend than {name}")
                samples.setdefault((version, name), []).append(times)
                print(f"[bench] {version} {name} #{repeat + 1}: {json.dumps(times)}", flush=True)
    phase, summary = summarize(samples, plan)
    context = {
        "command": "`" + shlex.join(["python", "bench/tracer_bench.py", *sys.argv[1:]]) + "`",
        "machine": f"{os.cpu_count()} cores, {platform.platform()}",
        "Pythons": ", ".join(sorted(set(versions.values()))),
        "processes": f"{args.repeats} per configuration, interleaved; each reports the "
        "fastest of its rounds per phase (CPU time of the process, both threads), the tables "
        "show the fastest over processes",
        "load": f"1-minute load average {os.getloadavg()[0]:.1f} at the end",
    }
    args.results.mkdir(parents=True, exist_ok=True)
    baseline = (args.baseline, read_summary(args.baseline)) if args.baseline else None
    text = render(phase, summary, plan, context, baseline)
    (args.results / "tracer.md").write_text(text)
    (args.results / "tracer.csv").write_text(render_csv(samples, phase, summary))
    print(text)


if __name__ == "__main__":
    main()
