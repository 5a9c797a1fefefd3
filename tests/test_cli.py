"""``sgtrace callgraph`` and ``sgtrace find`` end to end, on a small program of our own.

Outputs are compared whole. Exit codes: 0 success, 1 found a problem (``find`` of an unknown
name), 2 could not run (usage errors, bad source, missing target).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sgtrace.cli import main
from tests.graphs.golden import CASES_DIR

PROGRAM = {
    "app/__init__.py": "",
    "app/sub/__init__.py": "",
    "app/pipeline.py": """\
from app.util import clean


def load(path):
    return parse(path)


def parse(path):
    return clean(path)


def main():
    load("x")
    len("x")
""",
    "app/util.py": "def clean(text):\n    return text.strip()\n",
    "app/sub/util.py": "def clean(text):\n    return text\n",
}


@pytest.fixture
def program(tmp_path: Path) -> Path:
    """The program above under ``tmp_path/src``; returns that folder (resolved)."""
    root = tmp_path / "src"
    for rel, text in PROGRAM.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root.resolve()


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def sgtrace(program: Path, *args: str | Path) -> Result:
    """``sgtrace ARGS --source PROGRAM`` with the summary cache off."""
    return run(*args, "--source", program, "--no-cache")


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
    written = sorted(p.relative_to(cache) for p in cache.rglob("*.pkl"))
    assert written, "the first run summarised modules but cached none"
    second = run(*args, "--cache-dir", cache)
    assert second.stdout == first.stdout
    assert sorted(p.relative_to(cache) for p in cache.rglob("*.pkl")) == written  # reused
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


def short_edges(stdout: str) -> list[str]:
    data = json.loads(stdout)
    return sorted(
        f"{e['source'].split(':')[1]} -> {e['target'].split(':')[1]}" for e in data["edges"]
    )


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


# -- find ---------------------------------------------------------------------------------------
def test_find_found_exits_0(program: Path) -> None:
    result = sgtrace(program, "find", "clean")
    assert (result.exit_code, result.stderr) == (0, "")
    assert (
        result.stdout
        == """\
definitions:
  app/sub/util.py:1  app.sub.util:clean  (function)
  app/util.py:1  app.util:clean  (function)
call sites:
  app/pipeline.py:9  in app.pipeline:parse  -> app.util:clean  [import]
      return clean(path)
"""
    )


def test_find_json(program: Path) -> None:
    result = sgtrace(program, "find", "app.util:clean", "--format", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {
        "definitions": [
            {"file": "app/util.py", "line": 1, "qualname": "app.util:clean", "kind": "function"}
        ],
        "call_sites": [
            {
                "file": "app/pipeline.py",
                "line": 9,
                "caller": "app.pipeline:parse",
                "callee": "app.util:clean",
                "text": "return clean(path)",
                "guard": None,
                "how": "import",
            }
        ],
    }


def test_find_defined_but_never_called(program: Path) -> None:
    result = sgtrace(program, "find", "main")
    assert (result.exit_code, result.stdout) == (
        0,
        """\
definitions:
  app/pipeline.py:12  app.pipeline:main  (function)
call sites: none found
""",
    )


def test_find_not_found_exits_1_with_suggestions(program: Path) -> None:
    result = sgtrace(program, "find", "claen")
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (
        f"Error: no function or class named 'claen' in dir:{program}; did you mean clean?\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "Error: Missing argument 'NAME'."),
        (
            ("a:b:c",),
            "Error: 'a:b:c' is not a qualified name; write it as module:Qual.name, "
            "for example sglang.srt.managers.scheduler:Scheduler.run_batch",
        ),
        (
            ("clean", "--format", "xml"),
            "Error: Invalid value for '--format': 'xml' is not one of 'text', 'json'.",
        ),
    ],
    ids=["missing-name", "bad-qualname", "bad-format"],
)
def test_find_usage_errors_exit_2(program: Path, args: Sequence[str], message: str) -> None:
    result = sgtrace(program, "find", *args)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == message


# -- bad input ----------------------------------------------------------------------------------
def test_unparsable_file_is_reported_and_skipped(program: Path) -> None:
    (program / "app" / "broken.py").write_text("def broken(:\n    pass\n", encoding="utf-8")
    result = sgtrace(program, "callgraph", "app", "--format", "json")
    assert result.exit_code == 0
    # the position and wording after the file name come from libcst's parser
    assert re.fullmatch(
        r"warning: skipped unparsable file app/broken\.py:\d+:\d+: .+\n", result.stderr
    )
    assert short_edges(result.stdout) == ["load -> parse", "main -> load", "parse -> clean"]


def test_find_reports_unparsable_file(program: Path) -> None:
    (program / "app" / "broken.py").write_text("def clean(:\n", encoding="utf-8")
    result = sgtrace(program, "find", "clean")
    assert result.exit_code == 0
    assert result.stderr.startswith("warning: skipped unparsable file app/broken.py")


def test_missing_target_suggests_files(program: Path) -> None:
    result = sgtrace(program, "callgraph", "pipline.py")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"Error: target 'pipline.py' is not in dir:{program} ({program}); "
        "did you mean app/pipeline.py?\n"
    )


def test_missing_target_without_close_match(program: Path) -> None:
    result = sgtrace(program, "callgraph", "scheduler.py")
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: target 'scheduler.py' is not in dir:{program} ({program}); give a path, a file "
        "name such as scheduler.py, or a dotted module name\n"
    )


def test_unknown_source_directory(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    result = run("callgraph", "x.py", "--source", missing)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"Error: source {str(missing)!r} is not a directory; pass a folder that contains a "
        "package, sglang==X.Y.Z for a release from PyPI, or nothing for the installed sglang\n"
    )


def test_installed_default_without_sglang() -> None:
    if importlib_has("sglang"):
        pytest.skip("sglang is installed in this Python")
    for args in (("callgraph", "scheduler.py"), ("find", "Scheduler")):
        result = run(*args)
        assert result.exit_code == 2
        assert result.stderr == (
            f"Error: sglang is not installed in this Python ({sys.executable}); analyse a "
            "release without installing it: --source sglang==X.Y.Z (for example sglang==0.5.9), "
            "or pass a directory with --source\n"
        )


def importlib_has(name: str) -> bool:
    import importlib.metadata

    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_callgraph_needs_a_target_or_focus(program: Path) -> None:
    result = sgtrace(program, "callgraph")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        "Error: give a TARGET (for example scheduler.py) or --focus NAME"
    )


def test_debug_reraises(tmp_path: Path) -> None:
    from sgtrace.errors import SourceError

    result = CliRunner().invoke(main, ["--debug", "find", "x", "--source", str(tmp_path / "no")])
    assert result.exit_code == 1
    assert isinstance(result.exception, SourceError)


# -- start-up: commands load when run -----------------------------------------------------------
COMMANDS = ["callgraph", "find", "inject-hook", "launch", "report", "trace", "validate"]
HEAVY = ("libcst", "networkx", "pydot", "sgtrace.tracer", "sgtrace.hooks", "sgtrace.graphs.resolve")
LOADED = """\
import json, sys
from sgtrace.cli import main
try:
    main(sys.argv[1:], standalone_mode=False)
finally:
    heavy = [m for m in sys.modules if m.startswith(HEAVY)]
    print(json.dumps({"heavy": sorted(heavy), "commands": main.list_commands(None)}), file=sys.stderr)
"""


def loaded_by(*args: str | Path) -> dict[str, list[str]]:
    """What ``sgtrace ARGS`` imported of :data:`HEAVY`, and the commands it knows, run alone."""
    code = f"HEAVY = {HEAVY!r}\n{LOADED}"
    proc = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stderr.splitlines()[-1])


def test_every_command_is_listed_without_being_imported() -> None:
    assert loaded_by("--version") == {"heavy": [], "commands": COMMANDS}
    section = run("--help").stdout.split("Commands:\n", 1)[1]
    assert [line.split()[0] for line in section.splitlines()] == COMMANDS


def test_a_warm_callgraph_loads_no_parser_resolver_or_tracer(program: Path, tmp_path: Path) -> None:
    args = ("callgraph", "pipeline.py", "--source", program, "--cache-dir", tmp_path / "cache")
    cold = run(*args, "--format", "json")
    assert loaded_by(*args, "--format", "json", "-o", tmp_path / "warm.json")["heavy"] == []
    assert (tmp_path / "warm.json").read_text(encoding="utf-8") == cold.stdout


# -- the console script -------------------------------------------------------------------------
def console_script() -> str:
    beside = Path(sys.executable).parent / "sgtrace"
    found = str(beside) if beside.is_file() else shutil.which("sgtrace")
    if found is None:
        pytest.skip("the sgtrace console script is not installed")
    return found


def test_console_script_matches_the_library_entry_point(program: Path) -> None:
    exe = console_script()
    args = ["find", "clean", "--source", str(program), "--no-cache"]
    proc = subprocess.run([exe, *args], capture_output=True, text=True, check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, run(*args).stdout, "")
    missing = subprocess.run(
        [exe, "find", "claen", "--source", str(program), "--no-cache"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == (
        f"Error: no function or class named 'claen' in dir:{program}; did you mean clean?\n"
    )
    usage = subprocess.run([exe, "find"], capture_output=True, text=True, check=False)
    assert usage.returncode == 2
