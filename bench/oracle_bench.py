"""Recall of sgtrace's callees per call site against jedi, and a seeded precision sample.

For each decode-path file of two SGLang releases, every call site (a stdlib ``ast.Call``) is
asked of jedi (``Script.goto`` on the callee's last name, imports followed); the functions and
classes it names inside the analysed release are the oracle's callees of that line. sgtrace's
callees of the same line are those of its call graph of the file. A class found by the oracle
counts as found when sgtrace links the line to the class, one of its members or an ``__init__``
/ ``__post_init__`` (sgtrace links a constructor call to the initialiser it runs).

jedi's answers are cached under ``~/.cache/sgtrace/oracle`` (keyed by release, file and jedi's
version): asking jedi takes minutes, sgtrace a second. basedpyright is not used: see
``bench/results/oracle.md`` for why.

The precision check samples 30 edges of one release's graphs (``random.Random(SEED)``); the
verdicts, read off the source by hand, live in ``bench/oracle_verdicts.csv`` and are rendered
next to the sample.

    PYTHONPATH=src python bench/oracle_bench.py            # writes bench/results/oracle.{md,csv}
"""

from __future__ import annotations

import argparse
import ast
import csv
import io
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sgtrace.graphs.build import Project, build_call_graph
from sgtrace.graphs.model import CallGraph
from sgtrace.graphs.source import default_cache_dir, open_source
from sgtrace.names import QualName

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results"
VERDICTS = BENCH_DIR / "oracle_verdicts.csv"
SEED = 22
SAMPLE_RELEASE = "sglang==0.5.23"
FILES = {
    "sglang==0.5.9": (
        "sglang/srt/managers/scheduler.py",
        "sglang/srt/managers/scheduler_output_processor_mixin.py",
        "sglang/srt/speculative/eagle_worker_v2.py",
    ),
    "sglang==0.5.23": (
        "sglang/srt/managers/scheduler.py",
        "sglang/srt/managers/scheduler_components/batch_result_processor.py",
        "sglang/srt/speculative/eagle_worker_v2.py",
    ),
}
INITIALISERS = ("__init__", "__post_init__", "__new__")
SCHEDULER = "sglang/srt/managers/scheduler.py"
EARLIER_DRAW = (
    "A draw of the same seed on an earlier state of the engine held one imprecise edge:"
    " `scheduler.py:4517` `abort_reason: FINISH_ABORT = req.to_finish` then"
    " `abort_reason.to_json()` linked to `BaseFinishReason.to_json` (the declared type of"
    " `Req.to_finish`) as well as `FINISH_ABORT.to_json`, which overrides it. A local's"
    " annotation now narrows an inferred base class (case `local_annotation_narrows_base`);"
    " the edge is gone and the draw above is of the graph after the fix."
)


@dataclass(frozen=True)
class OracleCallee:
    """One callee jedi names for the call at ``line``: ``module:Qual.name`` and its kind."""

    line: int
    name: str
    is_class: bool


@dataclass(frozen=True)
class FileScore:
    release: str
    file: str
    oracle: int
    found: int
    missed: tuple[OracleCallee, ...]

    @property
    def recall(self) -> float:
        return self.found / self.oracle if self.oracle else 1.0


def call_positions(source: str) -> Iterator[tuple[int, int]]:
    """(line, column) of the last name of every call's callee (``b`` of ``a.b(...)``)."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name):
            yield func.lineno, func.col_offset
        elif isinstance(func, ast.Attribute) and func.end_lineno is not None:
            yield func.end_lineno, func.end_col_offset - len(func.attr)  # type: ignore[operator]


def ask_jedi(root: Path, file: str) -> list[OracleCallee]:
    """The callees jedi finds inside ``root`` for every call of ``file``."""
    import jedi

    project = jedi.Project(path=root, added_sys_path=[str(root)], smart_sys_path=False)
    path = root / file
    source = path.read_text(encoding="utf-8")
    script = jedi.Script(source, path=path, project=project)
    found: set[OracleCallee] = set()
    for line, column in call_positions(source):
        try:
            names = script.goto(line, column, follow_imports=True)
        except (ValueError, RecursionError, AttributeError):  # jedi's own failures on odd code
            continue
        for name in names:
            where = name.module_path
            if name.type not in ("function", "class") or where is None:
                continue
            if not Path(where).resolve().is_relative_to(root.resolve()):
                continue
            module = name.module_name
            full = name.full_name or ""
            if not full.startswith(module + "."):
                continue
            found.add(
                OracleCallee(line, f"{module}:{full[len(module) + 1 :]}", name.type == "class")
            )
    return sorted(found, key=lambda c: (c.line, c.name))


def oracle(release: str, root: Path, file: str) -> list[OracleCallee]:
    """jedi's callees of ``file``, from the cache when asked before."""
    import jedi

    cache = (
        default_cache_dir()
        / "oracle"
        / f"{release}-{jedi.__version__}-{file.replace('/', '_')}.json"
    )
    if cache.is_file():
        return [OracleCallee(**row) for row in json.loads(cache.read_text(encoding="utf-8"))]
    callees = ask_jedi(root, file)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps([c.__dict__ for c in callees]), encoding="utf-8")
    return callees


def sgtrace_callees(graph: CallGraph, file: str) -> dict[int, set[str]]:
    """Line -> callees of sgtrace's graph, for call sites in ``file``."""
    found: dict[int, set[str]] = {}
    for site in graph.sites:
        if site.file == file:  # jedi's full names leave out `<locals>`
            found.setdefault(site.line, set()).add(str(site.callee).replace(".<locals>", ""))
    return found


def is_found(callee: OracleCallee, ours: set[str]) -> bool:
    if callee.name in ours:
        return True
    if not callee.is_class:
        return False
    prefix = callee.name + "."
    return any(o.startswith(prefix) or o.endswith(INITIALISERS) for o in ours)


def score(release: str, file: str, graph: CallGraph, callees: list[OracleCallee]) -> FileScore:
    ours = sgtrace_callees(graph, file)
    missed = tuple(c for c in callees if not is_found(c, ours.get(c.line, set())))
    return FileScore(release, file, len(callees), len(callees) - len(missed), missed)


@dataclass(frozen=True)
class DispatchReach:
    """The handlers registered in the scheduler's request dispatcher, and those sgtrace links
    from ``Scheduler.process_input_requests`` with ``how`` = ``dispatch``."""

    release: str
    registered: tuple[str, ...]
    missing: tuple[str, ...]


def dispatcher_reach(release: str, project: Project, root: Path) -> DispatchReach:
    """Read the handlers off ``TypeBasedDispatcher([(ReqType, handler), ...])`` with ``ast``
    and check that each is a ``dispatch`` callee (a lambda handler: a ``<lambda>`` callee)."""
    source = (root / SCHEDULER).read_text(encoding="utf-8")
    registered: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        func = node.func if isinstance(node, ast.Call) else None
        if isinstance(func, ast.Name) and func.id == "TypeBasedDispatcher":
            mapping = node.args[0]  # type: ignore[union-attr]
            for pair in getattr(mapping, "elts", ()):
                registered.add(ast.unparse(pair.elts[1]))
    caller = QualName("sglang.srt.managers.scheduler", "Scheduler.process_input_requests")
    reached = {s.callee.short for s in project.callees(caller) if s.how == "dispatch"}
    missing = sorted(
        h
        for h in registered
        if ("<lambda>" if h.startswith("lambda") else h.rsplit(".", 1)[-1]) not in reached
    )
    return DispatchReach(release, tuple(sorted(registered)), tuple(missing))


def sample_edges(graphs: list[CallGraph], size: int) -> list[tuple[str, int, str, str, str]]:
    """``size`` call sites drawn with ``random.Random(SEED)`` from the sorted sites of
    ``graphs``: (file, line, caller, callee, how)."""
    sites = sorted(
        {(s.file, s.line, str(s.caller), str(s.callee), s.how) for g in graphs for s in g.sites}
    )
    return sorted(random.Random(SEED).sample(sites, min(size, len(sites))))


def read_verdicts() -> dict[tuple[str, str, str], tuple[str, str]]:
    """(file:line, caller, callee) -> (verdict, note) from ``bench/oracle_verdicts.csv``."""
    if not VERDICTS.is_file():
        return {}
    rows = csv.DictReader(VERDICTS.read_text(encoding="utf-8").splitlines())
    return {(r["site"], r["caller"], r["callee"]): (r["verdict"], r["note"]) for r in rows}


def render(
    scores: list[FileScore],
    sample: list[tuple[str, int, str, str, str]],
    reaches: list[DispatchReach],
) -> str:
    out = [
        "# sgtrace against jedi: callees per call site",
        "",
        "Generated by `PYTHONPATH=src python bench/oracle_bench.py` (also run by `nox -s bench`).",
        "Oracle: jedi "
        + _jedi_version()
        + " `Script.goto(follow_imports=True)` on the last name of every call's callee;"
        " only callees inside the release count. A class counts as found when sgtrace links the"
        " line to the class, a member of it, or an initialiser it runs.",
        "",
        "basedpyright was not used: its call hierarchy needs an LSP session per file"
        " (`textDocument/prepareCallHierarchy` then `callHierarchy/outgoingCalls` per function),"
        " which was more than the time given to this benchmark; jedi alone is the oracle here.",
        "",
        "| release | file | oracle callees | found by sgtrace | recall |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for release in FILES:
        rows = [s for s in scores if s.release == release]
        for s in rows:
            out.append(f"| {release} | `{s.file}` | {s.oracle} | {s.found} | {s.recall:.1%} |")
        total = sum(s.oracle for s in rows)
        found = sum(s.found for s in rows)
        out.append(f"| **{release}** | all | {total} | {found} | **{found / total:.1%}** |")
    out += [
        "",
        "## The scheduler's request dispatcher",
        "",
        "Handlers registered in `TypeBasedDispatcher([...])` (read with `ast`) that sgtrace links"
        " from `Scheduler.process_input_requests` (`self._request_dispatcher(recv_req)`) with"
        " `how` = `dispatch`:",
        "",
        "| release | registered | reached | missing |",
        "| --- | ---: | ---: | --- |",
    ]
    for r in reaches:
        reached = len(r.registered) - len(r.missing)
        missing = ", ".join(f"`{m}`" for m in r.missing) or "none"
        out.append(f"| {r.release} | {len(r.registered)} | {reached} | {missing} |")
    out += ["", "## Missed callees", ""]
    for s in scores:
        for c in s.missed:
            out.append(f"- {s.release} `{s.file}:{c.line}` -> `{c.name}`")
    verdicts = read_verdicts()
    out += [
        "",
        f"## Precision: {len(sample)} edges of {SAMPLE_RELEASE} drawn with seed {SEED}",
        "",
        "| site | caller | callee | how | verdict | note |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for file, line, caller, callee, how in sample:
        verdict, note = verdicts.get((f"{file}:{line}", caller, callee), ("unchecked", ""))
        out.append(f"| `{file}:{line}` | `{caller}` | `{callee}` | {how} | {verdict} | {note} |")
    out += ["", EARLIER_DRAW]
    return "\n".join(out) + "\n"


def _jedi_version() -> str:
    import jedi

    return str(jedi.__version__)


def render_csv(scores: list[FileScore]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["release", "file", "oracle", "found", "recall"])
    for s in scores:
        writer.writerow([s.release, s.file, s.oracle, s.found, f"{s.recall:.4f}"])
    return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    scores: list[FileScore] = []
    sampled: list[CallGraph] = []
    reaches: list[DispatchReach] = []
    for release, files in FILES.items():
        tree = open_source(release, default_cache_dir())
        project = Project(tree)
        for file in files:
            graph = build_call_graph(project, [file])
            scores.append(score(release, file, graph, oracle(release, tree.root, file)))
            if release == SAMPLE_RELEASE:
                sampled.append(graph)
            print(f"{release} {file}: {scores[-1].found}/{scores[-1].oracle}", flush=True)
        reaches.append(dispatcher_reach(release, project, tree.root))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "oracle.md").write_text(
        render(scores, sample_edges(sampled, 30), reaches), encoding="utf-8"
    )
    (args.out / "oracle.csv").write_text(render_csv(scores), encoding="utf-8")


if __name__ == "__main__":
    main()
