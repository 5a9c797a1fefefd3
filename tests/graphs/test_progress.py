"""Progress of long work: what the engine reports, and the throttled lines a command prints."""

from __future__ import annotations

from pathlib import Path

from sgtrace.graphs.build import Project, build_call_graph
from sgtrace.graphs.index import PARALLEL_MIN_FILES
from sgtrace.graphs.progress import Progress, Stage, ThrottledProgress
from sgtrace.graphs.source import open_source

MODULES = PARALLEL_MIN_FILES + 9


def write_program(root: Path) -> None:
    (root / "app").mkdir(parents=True)
    (root / "app" / "__init__.py").write_text("")
    for n in range(MODULES):
        (root / "app" / f"m{n}.py").write_text(
            f"def f{n}():\n    g{n}()\n\n\ndef g{n}():\n    pass\n"
        )


def test_a_parallel_load_and_the_resolution_report_their_progress(tmp_path: Path) -> None:
    write_program(tmp_path / "src")
    seen: list[Progress] = []
    project = Project(open_source(tmp_path / "src"), tmp_path / "cache", progress=seen.append)
    project.index.jobs = 2
    graph = build_call_graph(project, ["app"])
    assert len(graph.sites) == MODULES
    files = MODULES + 1  # and app/__init__.py
    parse = [(p.done, p.total) for p in seen if p.stage is Stage.PARSE]
    assert parse == [(8, files), (16, files), (24, files), (files, files)]
    resolve = [(p.done, p.total) for p in seen if p.stage is Stage.RESOLVE]
    definitions = 1 + 2 * MODULES + MODULES  # app's module level, f and g, each module level
    assert resolve == [(definitions, definitions)]


def test_throttled_lines_wait_then_thin_out_and_close_each_stage() -> None:
    ticks = iter([0.0, 1.0, 2.0, 2.5, 3.2, 3.3, 3.4, 3.5, 9.0])
    lines: list[str] = []
    sink = ThrottledProgress(lines.append, ticks.__next__, after_s=2.0, every_s=1.0)
    for done in (10, 20, 30, 40, 50):  # at 1.0 (too early), 2.0, 2.5 (too soon), 3.2, 3.3
        sink(Progress(Stage.PARSE, done, 60))
    sink(Progress(Stage.PARSE, 60, 60))  # at 3.4: the end of a stage that was shown
    sink(Progress(Stage.RESOLVE, 5, 10))  # at 3.5: too soon after the last line
    sink(Progress(Stage.RESOLVE, 10, 10))  # at 9.0
    assert lines == [
        "sgtrace: parsing 20/60 files (33%)",
        "sgtrace: parsing 40/60 files (66%)",
        "sgtrace: parsing 60/60 files (100%)",
        "sgtrace: resolving 10/10 definitions (100%)",
    ]


def test_a_short_run_prints_nothing() -> None:
    ticks = iter([0.0, 0.1, 0.2, 0.3])
    lines: list[str] = []
    sink = ThrottledProgress(lines.append, ticks.__next__)
    sink(Progress(Stage.PARSE, 5, 10))
    sink(Progress(Stage.PARSE, 10, 10))
    sink(Progress(Stage.RESOLVE, 3, 3))
    assert lines == []
