"""Benchmark the runtime tracer: cost per recorded call, and cost on everything not selected.

A fake SGLang scheduler (this file, imported as ``tracer_bench`` in a child process) runs a
step loop shaped like SGLang's EAGLE v2 decode path: each step makes 8 calls of selected
methods (run_batch, the speculative and target forwards, draft, draft_forward, verify, draft
extend, the decode-result handler) whose ``self``, batch and result carry the attributes the
built-in selection's extractors read (``forward_ct``, ``ps.tp_rank``, ``batch.reqs``,
``seq_lens.shape``, ``spec_info``, ``accept_lens``...), and, per work unit, a few hundred
unselected Python calls over 64 requests (methods, properties, a comprehension, a sort with a
key function, exceptions raised two frames deep and caught), a quarter of them in a second
thread that the step hands its batch to and waits for. The child runs three phases and prints their times:

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
and its call count checked. Results go to ``bench/results/tracer.md`` and ``tracer.csv``::

    python bench/tracer_bench.py                      # Pythons 3.12+ and 3.10/3.11 from pyenv
    python bench/tracer_bench.py --repeats 5 --python /usr/bin/python3.12
"""

from __future__ import annotations

import argparse
import enum
import json
import os
import platform
import queue
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REQS = 64  # requests per batch: concurrency 64, as in issue #4
SELECTED_PER_STEP = 8


class ForwardMode(enum.Enum):
    EXTEND = 1
    DECODE = 2


class CpuTensor:
    """Stands in for a CPU tensor: a ``shape``, ``is_cpu`` and ``tolist``."""

    is_cpu = True

    def __init__(self, values):
        self.values, self.shape = values, (len(values),)

    def tolist(self):
        return list(self.values)


class Req:
    def __init__(self, rid):
        self.rid, self.output_ids, self.finished_reason = rid, [], None
        self.sampling = {"max_new_tokens": 1 << 30, "stop": (2,)}

    @property
    def seqlen(self):
        return len(self.output_ids) + 16

    def append_token(self, token):
        self.output_ids.append(token)
        if len(self.output_ids) > 256:
            del self.output_ids[:128]

    def check_finished(self):
        if self.output_ids and self.output_ids[-1] in self.sampling["stop"]:
            self.finished_reason = "stop"
        return self.finished_reason is not None


class SpecInfo:
    def __init__(self):
        self.draft_token_num, self.spec_steps = 4, 3


class Batch:
    def __init__(self, reqs, step):
        self.reqs, self.forward_mode, self.forward_iter = reqs, ForwardMode.DECODE, step
        self.seq_lens = CpuTensor([16] * len(reqs))
        self.spec_info, self.batch_size = SpecInfo(), len(reqs)


class Result:
    def __init__(self, size):
        self.accept_lens = CpuTensor([2] * size)
        self.num_accepted_tokens = size


class Ps:
    tp_rank = 0


def _clamp(value, low, high):
    return low if value < low else high if value > high else value


class Cache:
    """A lookup that raises ``KeyError`` two frames below its caller on a miss."""

    def __init__(self):
        self.table = {key: key * 3 for key in range(0, 64, 2)}

    def _get(self, key):
        return self.table[key]

    def lookup(self, key):
        return self._get(key)


def unselected_work(reqs, cache, units):
    """``units`` passes of the bookkeeping a scheduler does per request; returns a checksum."""
    total = 0
    for _ in range(units):
        for req in reqs:
            total += _clamp(req.seqlen, 0, 1 << 20)
            req.append_token(total & 1023)
            if req.check_finished():
                req.finished_reason = None
        for key in range(8):  # half of them miss: raised in _get, caught here
            try:
                total += cache.lookup(key)
            except KeyError:
                total += 1
        lengths = {req.rid: len(req.output_ids) for req in reqs}
        total += sorted(reqs, key=lambda req: lengths[req.rid])[0].rid
    return total


class Helper(threading.Thread):
    """A second thread (as SGLang's output/stream threads): unselected work per handed batch."""

    def __init__(self, cache):
        super().__init__(daemon=True)
        self.inbox, self.outbox, self.cache = queue.Queue(), queue.Queue(), cache

    def run(self):
        while True:
            reqs, units = self.inbox.get()
            self.outbox.put(unselected_work(reqs, self.cache, units))


def layout(batch):
    """Sizes a forward derives from its batch. Each selected method unpacks them into ten
    locals: SGLang's traced methods have 10 to 25 locals unbound at entry, and reading
    ``frame.f_locals`` there costs per local (3.10 to 3.12)."""
    n = len(batch.reqs)
    return n, n * 4, n * 3, 4, 3, 1, n + 1, n * 2, 0, n - 1


class TargetWorker:
    def forward_batch_generation(self, model_worker_batch, is_verify=False):
        size, tokens, drafts, width, steps, topk, pad, cap, offset, last = layout(
            model_worker_batch
        )
        return Result(size if is_verify else last + 1)


class DraftWorker:
    speculative_num_steps, topk = 3, 1

    def draft(self, batch):
        size, tokens, drafts, width, steps, topk, pad, cap, offset, last = layout(batch)
        return self.draft_forward(batch) + offset

    def draft_forward(self, forward_batch):
        size, tokens, drafts, width, steps, topk, pad, cap, offset, last = layout(forward_batch)
        return forward_batch.batch_size + offset

    def _draft_extend_for_decode(self, batch, result):
        size, tokens, drafts, width, steps, topk, pad, cap, offset, last = layout(batch)
        return result if size else None


class SpecWorker:
    speculative_num_steps, speculative_num_draft_tokens = 3, 4

    def __init__(self):
        self.draft_worker, self.target_worker = DraftWorker(), TargetWorker()

    def forward_batch_generation(self, batch):
        size, tokens, drafts, width, steps, topk, pad, cap, offset, last = layout(batch)
        self.draft_worker.draft(batch)
        result = self.verify(batch)
        return self.draft_worker._draft_extend_for_decode(batch, result)

    def verify(self, batch):
        size, tokens, drafts, width, steps, topk, pad, cap, offset, last = layout(batch)
        return self.target_worker.forward_batch_generation(batch, is_verify=size > 0)


class BatchResultProcessor:
    def __init__(self, cache):
        self.cache = cache

    def process_batch_result_decode(self, batch, result, units):
        size, tokens, drafts, width, steps, topk, pad, cap, offset, last = layout(batch)
        return unselected_work(batch.reqs, self.cache, units) + offset


class Scheduler:
    def __init__(self):
        self.forward_ct, self.ps, self.cache = 0, Ps(), Cache()
        self.reqs = [Req(rid) for rid in range(REQS)]
        self.worker, self.processor = SpecWorker(), BatchResultProcessor(self.cache)
        self.helper = Helper(self.cache)
        self.helper.start()

    def get_next_batch_to_run(self, units):
        unselected_work(self.reqs, self.cache, units)
        return Batch(self.reqs, self.forward_ct + 1)

    def run_batch(self, batch):
        size, tokens, drafts, width, steps, topk, pad, cap, offset, last = layout(batch)
        self.forward_ct += 1
        return self.worker.forward_batch_generation(batch)

    def step(self, units):
        """One decode step: ``units`` of unselected work (a quarter in the helper thread, half
        before run_batch, a quarter in the decode-result handler) around 8 selected calls."""
        self.hand_over(units)
        batch = self.get_next_batch_to_run(units // 2)
        result = self.run_batch(batch)
        self.processor.process_batch_result_decode(batch, result, units // 4)

    def hand_over(self, units):
        """The helper thread's share, waited for: the threads never compete for the GIL,
        whose 5 ms switch interval would otherwise make the timings depend on luck."""
        if units:
            self.helper.inbox.put((self.reqs, units - units // 2 - units // 4))
            self.helper.outbox.get()

    def raises(self, count):
        """``count`` exceptions raised two frames down and caught, nothing else."""
        for _ in range(count):
            try:
                self.cache.lookup(1)
            except KeyError:
                pass

    def unselected(self, units):
        """The same unselected work as :meth:`step`, without the selected calls."""
        self.hand_over(units)
        unselected_work(self.reqs, self.cache, units // 2)
        unselected_work(self.reqs, self.cache, units // 4)


def child(plan):
    """Run the phases of ``plan`` (``[[name, kind, units, steps], ...]``), print their times."""
    scheduler, rounds, out = Scheduler(), plan["rounds"], {}
    for name, kind, units, steps in plan["phases"]:
        run = getattr(scheduler, kind)
        for _ in range(max(1, steps // 10)):  # warm-up
            run(units)
        best = float("inf")
        for _ in range(rounds):
            start = time.process_time()  # CPU time of both threads: other load shows less
            for _ in range(steps):
                run(units)
            best = min(best, (time.process_time() - start) / steps)
        out[name] = best
    print(json.dumps(out))


# The parent: everything below runs in the benchmarking process, where sgtrace is installed.

BENCH_DIR = Path(__file__).resolve().parent
UNITS = (20, 100, 400)  # units of unselected work per step of the steps@Nu phases
RAISES = 1000  # exceptions per round of the raises phase
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
        {Role(role): [QualName("tracer_bench", name)] for role, name in NAMES.items()}
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
    script = "import json, sys, tracer_bench; tracer_bench.child(json.loads(sys.argv[1]))"
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


def make_plan():
    """The same work on every machine and run, so that runs compare: the step rates it
    gives are measured (in brackets in the table)."""
    phases = [
        ["selected", "step", 0, 2000],
        ["unselected", "unselected", UNITS[1], 20],
        ["raises", "raises", RAISES, 50],
    ]
    phases += [[f"steps@{units}u", "step", units, 2000 // units] for units in UNITS]
    return {"rounds": 7, "phases": phases}


def _at_least(version, major, minor):
    return tuple(int(part) for part in version.split(".")[:2]) >= (major, minor)


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
