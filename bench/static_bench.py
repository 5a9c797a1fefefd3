"""Benchmark the static engine against its parsers and against pyan3 and JARVIS.

Every row runs one command as a child process (see ``measure.py``) on the SGLang 0.5.9 source:
``sgtrace callgraph`` on ``scheduler.py`` and on the whole ``sglang`` package, each with a
cold cache (a fresh ``--cache-dir``) then a warm one (the same directory again); LibCST and
stdlib ``ast`` parsing the same files sequentially; pyan3 and JARVIS (``jarviscg``) on the
same input. The ``*-0.5.23`` rows do the same on the whole package of SGLang 0.5.23 (4,719
files), the size the whole-package target is set for. Results go to
``bench/results/static.md`` and ``static.csv``; targets are printed as measured vs target and
never asserted. Rows not run this time (``--only``) are kept from the previous ``static.csv``,
each with the load and numbers of its own run.

Normally run through nox, which installs pyan3 and jarviscg into venvs of their own::

    nox -s bench
    nox -s bench -- --only 'sgtrace/scheduler/*'   # a subset of rows (fnmatch on row ids)
"""

from __future__ import annotations

import argparse
import enum
import fnmatch
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from measure import Limits, Measurement, Outcome, measure
from previous import previous_rows
from report import Row, Target, render_csv, render_markdown
from sgtrace.graphs.source import SourceTree, open_source
from tools import compile_bytecode, find_sgtrace, tool_version, without_home

RELEASE = "sglang==0.5.9"
LARGE_RELEASE = "sglang==0.5.23"  # the whole-package target (60 s cold, 1.5 GiB) is set on it
SCHEDULER = Path("sglang/srt/managers/scheduler.py")
BENCH_DIR = Path(__file__).resolve().parent

Summarize = Callable[[Path], str]


class CacheState(enum.Enum):
    """Whether a row's ``--cache-dir`` starts empty, holds the cold run's summaries, or is moot."""

    COLD = "cold"
    WARM = "warm"
    NONE = "-"


@dataclass(frozen=True)
class Case:
    """One row to measure: a command, where to run it, its limits, target and what to note."""

    row_id: str
    tool: str
    input: str
    cache: CacheState
    command: tuple[str, ...]
    limits: Limits
    target: Target | None = None
    output: Path | None = None
    summarize: Summarize | None = None
    fresh_dir: Path | None = None  # emptied before the run (a cold cache)
    requires: str | None = None  # a row that must have succeeded first (the cold run)
    note_is_stderr: bool = False  # the command's last stderr line is the note (parse counts)


@dataclass(frozen=True)
class Tools:
    """Executables under test; ``None`` when a tool is not installed (its rows are skipped)."""

    sgtrace: Path
    pyan3: Path | None
    jarviscg: Path | None


def sgtrace_cases(
    tools: Tools,
    trees: tuple[SourceTree, SourceTree],
    work: Path,
    limits: Limits,
    package_limits: Limits,
) -> list[Case]:
    """Cold and warm ``sgtrace callgraph`` rows for scheduler.py and the whole package (of
    0.5.9, and of the larger 0.5.23)."""
    tree, large = trees
    package_target = Target(60.0, 1536.0)
    specs = [
        ("scheduler", "scheduler.py", "scheduler.py", tree, limits, Target(3.0), Target(0.5)),
        ("package", "sglang", "sglang package", tree, package_limits, package_target, Target(3.0)),
        (
            "package-0.5.23",
            "sglang",
            "sglang 0.5.23 package",
            large,
            package_limits,
            package_target,
            Target(3.0),
        ),
    ]
    startup = (str(tools.sgtrace), "--version")  # imports the CLI and the engine, analyses nothing
    cases = [Case("sgtrace/startup", "sgtrace --version", "-", CacheState.NONE, startup, limits)]
    for key, target_arg, label, source, lim, cold_target, warm_target in specs:
        cache = work / f"cache-{key}"
        for state, target in ((CacheState.COLD, cold_target), (CacheState.WARM, warm_target)):
            out = work / f"sgtrace-{key}-{state.value}.json"
            command = (
                str(tools.sgtrace),
                "callgraph",
                target_arg,
                "--source",
                str(source.root),
                "--cache-dir",
                str(cache),
                "--format",
                "json",
                "-o",
                str(out),
            )
            cases.append(
                Case(
                    f"sgtrace/{key}/{state.value}",
                    "sgtrace",
                    label,
                    state,
                    command,
                    lim,
                    target,
                    out,
                    lambda path, cache=cache: f"{summarize_node_link(path)}; {count_cache(cache)}",
                    fresh_dir=cache if state is CacheState.COLD else None,
                    requires=None if state is CacheState.COLD else f"sgtrace/{key}/cold",
                )
            )
    return cases


def parser_cases(trees: tuple[SourceTree, SourceTree], work: Path, limits: Limits) -> list[Case]:
    """LibCST and ``ast`` parsing scheduler.py alone and every file of each package."""
    tree, large = trees
    inputs = {
        "scheduler": ("scheduler.py", [tree.root / SCHEDULER]),
        "package": ("sglang package", package_files(tree)),
        "package-0.5.23": ("sglang 0.5.23 package", package_files(large)),
    }
    cases: list[Case] = []
    for key, (label, files) in inputs.items():
        listing = work / f"files-{key}.txt"
        listing.write_text("".join(f"{f}\n" for f in files))
        for parser in ("libcst", "ast"):
            command = (sys.executable, str(BENCH_DIR / "parse_files.py"), parser, str(listing))
            row_id = f"{parser}/{key}"
            cases.append(
                Case(
                    row_id,
                    f"{parser} parse",
                    label,
                    CacheState.NONE,
                    command,
                    limits,
                    note_is_stderr=True,
                )
            )
    return cases


def other_tool_cases(tools: Tools, tree: SourceTree, work: Path, limits: Limits) -> list[Case]:
    """pyan3 and JARVIS on scheduler.py and on every file of the package."""
    inputs = {
        "scheduler": ("scheduler.py", [tree.root / SCHEDULER]),
        "package": ("sglang package", package_files(tree)),
    }
    cases: list[Case] = []
    for key, (label, files) in inputs.items():
        paths = [str(f) for f in files]
        if tools.pyan3 is not None:
            out = work / f"pyan3-{key}.txt"
            command = (
                str(tools.pyan3),
                *paths,
                "--root",
                str(tree.root),
                "--text",
                "--file",
                str(out),
            )
            cases.append(
                Case(
                    f"pyan3/{key}",
                    "pyan3",
                    label,
                    CacheState.NONE,
                    command,
                    limits,
                    output=out,
                    summarize=summarize_pyan_text,
                )
            )
        if tools.jarviscg is not None:
            out = work / f"jarviscg-{key}.json"
            command = (str(tools.jarviscg), *paths, "--package", str(tree.root), "-o", str(out))
            cases.append(
                Case(
                    f"jarviscg/{key}",
                    "jarviscg",
                    label,
                    CacheState.NONE,
                    command,
                    limits,
                    output=out,
                    summarize=summarize_adjacency,
                )
            )
    return cases


def package_files(tree: SourceTree) -> list[Path]:
    """Every ``.py`` file of the analysed packages, sorted."""
    return sorted(p for pkg in tree.packages for p in (tree.root / pkg).rglob("*.py"))


def summarize_node_link(path: Path) -> str:
    """``N nodes, M edges`` of sgtrace's JSON (networkx node-link data)."""
    data = json.loads(path.read_text())
    return f"{len(data['nodes'])} nodes, {len(data['edges'])} edges"


def summarize_pyan_text(path: Path) -> str:
    """Definitions and ``[U]`` (uses) edges in pyan3's ``--text`` output."""
    lines = path.read_text().splitlines()
    uses = sum(1 for line in lines if line.lstrip().startswith("[U]"))
    return f"{sum(1 for line in lines if not line.startswith(' '))} nodes with edges, {uses} uses edges"


def summarize_adjacency(path: Path) -> str:
    """Nodes and edges of JARVIS's JSON adjacency list (``{caller: [callee, ...]}``)."""
    data = json.loads(path.read_text())
    return f"{len(data)} nodes, {sum(len(v) for v in data.values())} edges"


def count_cache(cache: Path) -> str:
    """How many entries the summary cache holds (about the number of modules parsed)."""
    return f"{sum(1 for _ in cache.rglob('*.sgc'))} cache entries"


def run_case(case: Case, done: dict[str, Row]) -> Row:
    """Measure one case, or skip it when the cold run it needs did not succeed."""
    if case.requires is not None:
        before = done.get(case.requires)
        if before is None or before.measurement is None or before.measurement.outcome != Outcome.OK:
            return Row(
                case.row_id,
                case.tool,
                case.input,
                case.cache.value,
                case.target,
                None,
                f"skipped: {case.requires} did not succeed",
            )
    if case.fresh_dir is not None:
        shutil.rmtree(case.fresh_dir, ignore_errors=True)
        case.fresh_dir.mkdir(parents=True)
    print(
        f"[bench] {case.row_id}: {' '.join(case.command[:6])}{' ...' * (len(case.command) > 6)}",
        flush=True,
    )
    load = os.getloadavg()[0]
    result = measure(list(case.command), case.limits)
    note = ""
    if result.outcome == Outcome.OK and case.summarize and case.output and case.output.exists():
        note = case.summarize(case.output)
    elif result.outcome == Outcome.OK and case.note_is_stderr:
        note = result.stderr_tail.splitlines()[-1] if result.stderr_tail else ""
    elif result.outcome != Outcome.OK:
        note = _limit_note(result, case.limits)
    row = Row(case.row_id, case.tool, case.input, case.cache.value, case.target, result, note, load)
    print(
        f"[bench]   {row.status_text()} {result.wall_s:.2f} s (cpu {result.cpu_s:.2f} s), "
        f"{result.peak_mib:.0f} MiB"
        f"{'  ' + row.verdict() if case.target else ''}",
        flush=True,
    )
    return row


def _limit_note(result: Measurement, limits: Limits) -> str:
    if result.outcome == Outcome.TIMEOUT:
        return f"killed after {limits.timeout_s:.0f} s"
    if result.outcome == Outcome.MEMORY:
        return f"killed over {limits.memory_cap_mib:.0f} MiB"
    last = result.stderr_tail.strip().splitlines()[-1:] or ["no stderr"]
    return f"exit {result.returncode}: {last[0][:160]}"


def parse_args() -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pyan3", type=Path, help="pyan3 executable (rows skipped if not given)")
    p.add_argument("--jarviscg", type=Path, help="jarviscg executable (rows skipped if not given)")
    p.add_argument("--results", type=Path, default=BENCH_DIR / "results")
    p.add_argument("--timeout-s", type=float, default=600.0, help="limit for each command")
    p.add_argument(
        "--package-timeout-s",
        type=float,
        default=900.0,
        help="limit for sgtrace on the whole package",
    )
    p.add_argument(
        "--memory-cap-mib",
        type=float,
        default=8192.0,
        help="kill a command whose process tree goes over this much resident memory",
    )
    p.add_argument("--note", default="", help="a line for the results page (what was measured)")
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PATTERN",
        help="run only rows whose id matches (fnmatch, repeatable), e.g. 'pyan3/*'",
    )
    return p.parse_args()


def main() -> None:
    """Run the selected rows and write the markdown and CSV tables."""
    args = parse_args()
    # SIGTERM (nox interrupted, a CI limit) unwinds like Ctrl-C, so the running child is killed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    tools = Tools(find_sgtrace(), args.pyan3, args.jarviscg)
    tree = open_source(RELEASE)
    large = open_source(LARGE_RELEASE)
    # No row pays for compiling bytecode or a cold page cache: compile once, start once.
    compile_bytecode(tools.sgtrace)
    subprocess.run([str(tools.sgtrace), "--version"], capture_output=True, check=False)
    limits = Limits(args.timeout_s, args.memory_cap_mib)
    package_limits = Limits(args.package_timeout_s, args.memory_cap_mib)
    versions = {
        "sgtrace": tool_version(tools.sgtrace, "sgtrace"),
        "libcst": tool_version(Path(sys.executable), "libcst"),
    }
    if tools.pyan3:
        versions["pyan3"] = tool_version(tools.pyan3, "pyan3")
    if tools.jarviscg:
        versions["jarviscg"] = tool_version(tools.jarviscg, "jarviscg")
    with tempfile.TemporaryDirectory(prefix="sgtrace-bench-") as tmp:
        work = Path(tmp)
        cases = [
            *sgtrace_cases(tools, (tree, large), work, limits, package_limits),
            *parser_cases((tree, large), work, limits),
            *other_tool_cases(tools, tree, work, limits),
        ]
        chosen = [
            c
            for c in cases
            if not args.only or any(fnmatch.fnmatch(c.row_id, pat) for pat in args.only)
        ]
        done: dict[str, Row] = {}
        for case in chosen:
            done[case.row_id] = run_case(case, done)
    files = package_files(tree)
    lines = sum(len(f.read_bytes().splitlines()) for f in files)
    large_files = package_files(large)
    large_lines = sum(len(f.read_bytes().splitlines()) for f in large_files)
    context = {
        "source": f"{tree.label} at {without_home(tree.root)}; rows *-0.5.23: {large.label} at "
        f"{without_home(large.root)}",
        "input size": f"{len(files)} files, {lines} lines; scheduler.py "
        f"{len((tree.root / SCHEDULER).read_bytes().splitlines())} lines; 0.5.23: "
        f"{len(large_files)} files, {large_lines} lines",
        "versions": ", ".join(f"{k} {v}" for k, v in versions.items()),
        **({"note": args.note} if args.note else {}),
    }
    kept = previous_rows(args.results)
    order = [c.row_id for c in cases]
    rows = [done.get(r) or kept[r] for r in order if r in done or r in kept]
    rows += [row for row_id, row in kept.items() if row_id not in order]  # tools not given now
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "static.md").write_text(render_markdown(rows, context))
    (args.results / "static.csv").write_text(render_csv(rows))
    print(f"[bench] wrote {args.results / 'static.md'} and static.csv")


if __name__ == "__main__":
    main()
