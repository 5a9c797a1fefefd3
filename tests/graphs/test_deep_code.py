"""Deeply nested code, valid or not, is one warning naming the file; the rest is analysed.

sgtrace's own traversals (the libcst walker, the outline pass) recurse per nesting level; a
file nested deeper than Python's recursion limit must not abort the whole analysis.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sgtrace.cli import main
from sgtrace.graphs.build import Project, build_call_graph
from sgtrace.graphs.source import open_source

TERMS = 1000
DEEP = {  # each is what one file holds; the valid ones parse with Python's own compiler
    "sum": "x = " + " + ".join(["1"] * TERMS) + "\n",
    "negations": "x = " + "-" * TERMS + "1\n",
    "lambdas": "x = " + "lambda: " * TERMS + "1\n",
    "conditionals": "x = " + "1 if c else " * TERMS + "1\n",
    "invalid": "x = " + "1 if c else " * TERMS + "1 +\n",
}
OK = "from app.deep import x\n\n\ndef h():\n    k()\n\n\ndef k():\n    pass\n"


def write_program(root: Path, deep: str) -> Path:
    (root / "app").mkdir(parents=True)
    (root / "app" / "__init__.py").write_text("")
    (root / "app" / "deep.py").write_text(deep + "\n\ndef f():\n    g()\n\n\ndef g():\n    pass\n")
    (root / "app" / "ok.py").write_text(OK)
    return root


@pytest.mark.parametrize("shape", sorted(DEEP))
def test_deep_file_is_skipped_with_its_reason_and_the_rest_analysed(
    tmp_path: Path, shape: str
) -> None:
    project = Project(open_source(write_program(tmp_path / "src", DEEP[shape])), use_cache=False)
    graph = build_call_graph(project, ["app"])
    edges = sorted((str(s.caller), str(s.callee)) for s in graph.sites)
    assert edges == [("app.ok:h", "app.ok:k")]
    error = project.index.loaded["app.deep"].parse_error
    assert error is not None and error.startswith("app/deep.py"), error


@pytest.mark.parametrize("shape", ["sum", "lambdas"])
def test_deep_file_as_an_import_only_is_skipped_too(tmp_path: Path, shape: str) -> None:
    """The outline pass (definitions of imported modules) meets the same file: it reads it
    or skips it with a reason, and the importer is analysed either way."""
    project = Project(open_source(write_program(tmp_path / "src", DEEP[shape])), use_cache=False)
    graph = build_call_graph(project, ["app.ok"])
    assert sorted((str(s.caller), str(s.callee)) for s in graph.sites) == [("app.ok:h", "app.ok:k")]
    deep = project.index.loaded["app.deep"]  # its definitions, or why it was skipped
    assert sorted(deep.functions) == ["f", "g"] or str(deep.parse_error).startswith("app/deep.py")


def test_cli_gives_one_warning_line_naming_the_file(tmp_path: Path) -> None:
    root = write_program(tmp_path / "src", DEEP["sum"])
    result = CliRunner().invoke(
        main,
        ["callgraph", "app", "--source", str(root), "--no-cache", "--format", "text"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0
    warnings = result.stderr.splitlines()
    assert len(warnings) == 1 and "app/deep.py" in warnings[0], result.stderr
    assert "RecursionError" not in result.stdout
    assert "h  ok.py:4\n  5: k  [local]  (ok.py:8)\n" in result.stdout


def test_deep_file_in_a_parallel_load_is_skipped_too(tmp_path: Path) -> None:
    """The pool's workers summarise it: the same one error, the other files analysed."""
    from sgtrace.graphs.index import PARALLEL_MIN_FILES

    root = write_program(tmp_path / "src", DEEP["negations"])
    for n in range(PARALLEL_MIN_FILES):
        (root / "app" / f"m{n}.py").write_text(
            f"def a{n}():\n    b{n}()\n\n\ndef b{n}():\n    pass\n"
        )
    project = Project(open_source(root), tmp_path / "cache")
    project.index.jobs = 2
    graph = build_call_graph(project, ["app"])
    assert len(graph.sites) == PARALLEL_MIN_FILES + 1
    errors = [s.parse_error for s in project.index.loaded.values() if s.parse_error]
    assert errors == ["app/deep.py: nested too deeply for sgtrace's traversal (RecursionError)"]
