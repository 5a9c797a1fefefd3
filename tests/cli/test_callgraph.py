"""``sgtrace callgraph`` end to end on the program of ``conftest.py``: formats, output files,
the cache, focus, depth and direction. Outputs are compared whole."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.cli.support import run, sgtrace, short_edges
from tests.graphs.golden import CASES_DIR


# -- callgraph: formats ------------------------------------------------------------------------
def test_callgraph_text(program: Path) -> None:
    result = sgtrace(program, "callgraph", "pipeline.py", "--format", "text")
    assert (result.exit_code, result.stderr) == (0, "")
    assert (
        result.stdout
        == f"""\
# dir:{program}; files under app/
<module>  pipeline.py:1
load  pipeline.py:4
  5: parse  [local]  (pipeline.py:8)
    9: clean  [import]  (util.py:1)
main  pipeline.py:12
  13: load  [local] (see above)  (pipeline.py:4)
# 3 resolved call sites; 1 unresolved (builtin 1)
# N: Name  [how]  (file:line): Name, defined at file:line, is called on line N
#   [import]  through an import (re-exports included)
#   [local]   defined in the same module
"""
    )


def test_callgraph_json_is_the_golden_graph() -> None:
    """The CLI's JSON of a golden case's input is that case's expected.json (only the source
    label differs: the CLI names the directory)."""
    case = CASES_DIR / "method_via_mro"
    result = run("callgraph", "app", "--source", case / "input", "--format", "json", "--no-cache")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["graph"]["source"] == f"dir:{(case / 'input').resolve()}"
    data["graph"]["source"] = "cases/method_via_mro/input"
    assert data == json.loads((case / "expected.json").read_text(encoding="utf-8"))


def test_callgraph_json_is_the_default_off_a_terminal(program: Path) -> None:
    default = sgtrace(program, "callgraph", "pipeline.py")
    explicit = sgtrace(program, "callgraph", "pipeline.py", "--format", "json")
    assert default.stdout == explicit.stdout
    assert json.loads(default.stdout)["graph"] == {
        "roots": [
            "app.pipeline:<module>",
            "app.pipeline:load",
            "app.pipeline:main",
            "app.pipeline:parse",
        ],
        "source": f"dir:{program}",
        "unresolved": {"builtin": 1},
    }


def test_callgraph_dot(program: Path) -> None:
    result = sgtrace(program, "callgraph", "pipeline.py", "--format", "dot")
    assert result.exit_code == 0
    assert (
        result.stdout
        == f"""\
digraph "callgraph" {{
rankdir=LR;
fontname=Helvetica;
label="dir:{program}";
labelloc=t;
node [shape=box, fontname=Helvetica, fontsize=10, style=rounded];
edge [fontname=Helvetica, fontsize=8];
subgraph cluster_file0 {{
label="app/pipeline.py";
style=dashed;
fontname=Helvetica;
"app.pipeline:<module>" [label="<module>
:1", penwidth=2];
"app.pipeline:load" [label="load
:4", penwidth=2];
"app.pipeline:main" [label="main
:12", penwidth=2];
"app.pipeline:parse" [label="parse
:8", penwidth=2];
}}
subgraph cluster_file1 {{
label="app/util.py";
style=dashed;
fontname=Helvetica;
"app.util:clean" [label="clean
:1"];
}}
"app.pipeline:load" -> "app.pipeline:parse" [label="local @5"];
"app.pipeline:main" -> "app.pipeline:load" [label="local @13"];
"app.pipeline:parse" -> "app.util:clean" [label="import @9"];
}}
"""
    )


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_callgraph_svg(program: Path) -> None:
    result = sgtrace(program, "callgraph", "pipeline.py", "--format", "svg")
    assert result.exit_code == 0
    svg = ET.fromstring(result.stdout)
    ns = {"svg": "http://www.w3.org/2000/svg"}
    titles = {
        kind: sorted(
            g.find("svg:title", ns).text for g in svg.iterfind(f".//svg:g[@class='{kind}']", ns)
        )
        for kind in ("node", "edge")
    }
    assert titles == {
        "node": [
            "app.pipeline:<module>",
            "app.pipeline:load",
            "app.pipeline:main",
            "app.pipeline:parse",
            "app.util:clean",
        ],
        "edge": [
            "app.pipeline:load->app.pipeline:parse",
            "app.pipeline:main->app.pipeline:load",
            "app.pipeline:parse->app.util:clean",
        ],
    }


@pytest.mark.parametrize("fmt", ["text", "json", "dot"])
def test_output_file_holds_what_stdout_would(program: Path, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"graph.{fmt}"
    written = sgtrace(program, "callgraph", "pipeline.py", "--format", fmt, "-o", out)
    printed = sgtrace(program, "callgraph", "pipeline.py", "--format", fmt)
    assert (written.exit_code, written.stdout, written.stderr) == (0, "", f"wrote {out}\n")
    assert out.read_text(encoding="utf-8") == printed.stdout


def test_cache_dir_is_used_and_no_cache_writes_nothing(program: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    args = ("callgraph", "pipeline.py", "--source", program, "--format", "json")
    first = run(*args, "--cache-dir", cache)
    written = sorted(p.relative_to(cache) for p in cache.rglob("*.sgc"))
    assert written, "the first run summarised modules but cached none"
    second = run(*args, "--cache-dir", cache)
    assert second.stdout == first.stdout
    assert sorted(p.relative_to(cache) for p in cache.rglob("*.sgc")) == written  # reused
    other = tmp_path / "unused"
    assert run(*args, "--cache-dir", other, "--no-cache").stdout == first.stdout
    assert not other.exists()


# -- callgraph: focus, depth, direction --------------------------------------------------------
FOCUS_CASES = [
    (("--focus", "load"), ["load -> parse", "parse -> clean"]),
    (("--focus", "load", "--depth", "1"), ["load -> parse"]),
    (("--focus", "app.pipeline:main", "--depth", "2"), ["load -> parse", "main -> load"]),
    (("--focus", "parse", "--direction", "callers", "--depth", "1"), ["load -> parse"]),
    (
        ("--focus", "parse", "--direction", "callers", "--depth", "2"),
        ["load -> parse", "main -> load"],
    ),
    (
        ("--focus", "parse", "--direction", "both", "--depth", "1"),
        ["load -> parse", "parse -> clean"],
    ),
]


@pytest.mark.parametrize(("args", "edges"), FOCUS_CASES, ids=[" ".join(a) for a, _ in FOCUS_CASES])
def test_focus_depth_direction(program: Path, args: Sequence[str], edges: list[str]) -> None:
    result = sgtrace(program, "callgraph", *args, "--format", "json")
    assert result.exit_code == 0, result.output
    assert short_edges(result.stdout) == edges


def test_callers_text_tree(program: Path) -> None:
    result = sgtrace(
        program,
        "callgraph",
        "--focus",
        "parse",
        "--direction",
        "callers",
        "--depth",
        "2",
        "--format",
        "text",
    )
    assert (
        result.stdout
        == f"""\
# dir:{program}; files under app/
callers of parse  pipeline.py:8
  <- load  [local]  (pipeline.py:5)
    <- main  [local]  (pipeline.py:13)
# 2 resolved call sites; 0 unresolved
# <- Name  [how]  (file:line): Name calls the function above at file:line
#   [local]  defined in the same module
"""
    )


def test_unknown_focus_suggests_names(program: Path) -> None:
    result = sgtrace(program, "callgraph", "--focus", "pars")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"Error: no function or class named 'pars' in dir:{program}; did you mean parse?\n"
    )


def test_ambiguous_bare_file_name_is_noted(program: Path) -> None:
    result = sgtrace(program, "callgraph", "util.py", "--format", "json")
    assert result.exit_code == 0
    assert result.stderr == "util.py: chose app/util.py; also matching: app/sub/util.py\n"
    assert json.loads(result.stdout)["graph"]["roots"] == ["app.util:<module>", "app.util:clean"]


def test_path_target_is_not_ambiguous(program: Path) -> None:
    result = sgtrace(program, "callgraph", program / "app" / "sub" / "util.py", "--format", "json")
    assert (result.exit_code, result.stderr) == (0, "")
    assert json.loads(result.stdout)["graph"]["roots"] == [
        "app.sub.util:<module>",
        "app.sub.util:clean",
    ]
