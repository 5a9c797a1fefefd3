"""What a new user trips on with ``callgraph`` and ``find``: each case gets the output it asked
for or one line that says what to try (exit 2), never a traceback or a wrong file.

The real CLI runs in a subprocess; Graphviz and pip are the real programs (pip against a local
folder of wheels, so that no test needs the network, except the one marked ``network``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from sgtrace.graphs import download
from sgtrace.graphs.tree import LEGEND, WIDTH
from sgtrace.graphs.values import How
from tests.faults.static_support import Run, sgtrace_cli, write_program
from tests.graphs.golden import CASES_DIR

NAMESPACE = {  # no __init__.py anywhere, as in SGLang's subpackages
    "ns/srt/managers/sched.py": "from ns.srt.managers.util import tidy\n\n\ndef step():\n"
    "    return tidy()\n",
    "ns/srt/managers/util.py": "def tidy():\n    return 1\n",
    "ns/srt/other.py": "def elsewhere():\n    return 2\n",
}
CHAIN = {
    f"chain/m{i}.py": f"from chain.m{i + 1} import f{i + 1}\n\n\ndef f{i}():\n    return f{i + 1}()\n"
    for i in range(5)
}
CHAIN["chain/m5.py"] = "def f5():\n    return 5\n"


def roots(run: Run) -> list[str]:
    assert (run.code, without_progress(run.stderr)) == (0, ""), run.stderr
    return json.loads(run.stdout)["graph"]["roots"]


def without_progress(stderr: str) -> str:
    """``stderr`` without the progress lines a run longer than 2 s prints (a loaded machine)."""
    return "".join(line for line in stderr.splitlines(True) if not PROGRESS.match(line))


PROGRESS = re.compile(r"sgtrace: \w+ \d+/\d+ \w+ \(\d+%\)$")


# -- TARGET: namespace packages and directories ---------------------------------------------------
def test_namespace_package_and_its_directory_are_targets(tmp_path: Path) -> None:
    root = write_program(tmp_path / "src", NAMESPACE)
    args = ("--source", root, "--no-cache", "--format", "json")
    expected = ["ns.srt.managers.sched:<module>", "ns.srt.managers.sched:step"]
    expected += ["ns.srt.managers.util:<module>", "ns.srt.managers.util:tidy"]
    dotted = sgtrace_cli("callgraph", "ns.srt.managers", *args)
    assert roots(dotted) == expected
    for target, cwd in [
        (root / "ns" / "srt" / "managers", None),  # an absolute path
        ("ns/srt/managers/", root),  # a path relative to the working directory
        ("ns/srt/managers", tmp_path),  # relative to the source root, not to the cwd
    ]:
        assert sgtrace_cli("callgraph", target, *args, cwd=cwd) == dotted


@pytest.mark.network
def test_sglang_namespace_subpackage_is_a_target() -> None:
    """``sglang.srt.managers`` has no ``__init__.py`` in 0.5.9; its directory names it too."""
    args = ("--source", "sglang==0.5.9", "--format", "json")
    dotted = sgtrace_cli("callgraph", "sglang.srt.managers", *args)
    modules = {name.split(":")[0] for name in roots(dotted)}
    assert {"sglang.srt.managers.scheduler", "sglang.srt.managers.io_struct"} <= modules
    assert all(m.startswith("sglang.srt.managers.") for m in modules)
    by_path = sgtrace_cli("callgraph", "sglang/srt/managers", *args)
    assert (by_path.code, by_path.stdout) == (dotted.code, dotted.stdout)
    assert without_progress(by_path.stderr) == without_progress(dotted.stderr) == ""


def test_directory_outside_the_source_is_refused(tmp_path: Path) -> None:
    root = write_program(tmp_path / "src", NAMESPACE)
    (tmp_path / "other").mkdir()
    run = sgtrace_cli("callgraph", tmp_path / "other", "--source", root, "--no-cache")
    assert run == Run(
        2,
        "",
        f"Error: directory '{tmp_path / 'other'}' holds no module of dir:{root} ({root}); give "
        f"a directory inside it, or analyse that one with --source {tmp_path / 'other'}\n",
    )


# -- -o and --format ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "fmt"),
    [("g.dot", "dot"), ("g.gv", "dot"), ("g.json", "json"), ("g.txt", "text"), ("G.JSON", "json")],
)
def test_output_extension_picks_the_format(tmp_path: Path, name: str, fmt: str) -> None:
    root = write_program(tmp_path / "src")
    args = ("callgraph", "app", "--source", root, "--no-cache")
    written = sgtrace_cli(*args, "-o", tmp_path / name)
    assert written == Run(0, "", f"wrote {tmp_path / name}\n")
    printed = sgtrace_cli(*args, "--format", fmt)
    assert (tmp_path / name).read_text(encoding="utf-8") == printed.stdout


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_svg_extension_writes_svg(tmp_path: Path) -> None:
    root = write_program(tmp_path / "src")
    out = tmp_path / "graph.svg"
    run = sgtrace_cli("callgraph", "app", "--source", root, "--no-cache", "-o", out)
    assert run == Run(0, "", f"wrote {out}\n")
    assert out.read_text(encoding="utf-8").startswith("<?xml")


@pytest.mark.parametrize(
    ("name", "flags", "message"),
    [
        (
            "graph.svg",
            ("--format", "json"),
            "--format json contradicts -o {out} (a .svg file holds svg); drop --format, or name "
            "the file {stem}.json",
        ),
        (
            "graph.txt",
            ("--format", "text", "--format", "dot"),
            "--format dot contradicts -o {out} (a .txt file holds text); drop --format, or name "
            "the file {stem}.dot",
        ),
        (
            "graph.png",
            (),
            "cannot tell the format of {out} from its extension; name it .svg, .dot, .gv, .json, "
            ".txt or give --format (text, json, dot, svg)",
        ),
    ],
    ids=["svg-json", "txt-dot", "png"],
)
def test_format_the_file_name_belies_is_refused(
    tmp_path: Path, name: str, flags: tuple[str, ...], message: str
) -> None:
    root = write_program(tmp_path / "src")
    out = tmp_path / name
    run = sgtrace_cli("callgraph", "app", "--source", root, "--no-cache", "-o", out, *flags)
    text = message.format(out=out, stem=tmp_path / "graph")
    assert run == Run(2, "", f"Error: {text}\n")
    assert not out.exists()


# -- --focus depth and Graphviz failures ----------------------------------------------------------
def edges(run: Run) -> list[str]:
    assert run.code == 0, run.stderr
    return sorted(f"{e['source']} -> {e['target']}" for e in json.loads(run.stdout)["edges"])


def test_focus_without_depth_stops_at_three_levels(tmp_path: Path) -> None:
    root = write_program(tmp_path / "src", CHAIN)
    args = ("callgraph", "--focus", "f0", "--source", root, "--no-cache", "--format", "json")
    chain = [f"chain.m{i}:f{i} -> chain.m{i + 1}:f{i + 1}" for i in range(5)]
    assert edges(sgtrace_cli(*args)) == chain[:3]
    assert edges(sgtrace_cli(*args, "--depth", "3")) == chain[:3]
    assert edges(sgtrace_cli(*args, "--depth", "9")) == chain
    help_text = " ".join(sgtrace_cli("callgraph", "--help").stdout.split())
    assert (
        "--depth INTEGER RANGE Levels to expand from the focus (default 3 with --focus;"
        in help_text
    )


def test_failing_graphviz_is_one_line_with_a_hint(tmp_path: Path) -> None:
    dot = shutil.which("dot")
    if dot is None:
        pytest.skip("Graphviz's dot is not installed")
    root = write_program(tmp_path / "src")
    (tmp_path / "no-plugins").mkdir()
    env = {"GVBINDIR": str(tmp_path / "no-plugins")}  # real dot, without its format plugins
    run = sgtrace_cli(
        "callgraph", "app", "--source", root, "--no-cache", "--format", "svg", env=env
    )
    assert run == Run(
        2,
        "",
        f'Error: Graphviz\'s dot ({dot}) failed with exit code 1: Format: "svg" not recognized. '
        "Use one of:; check that `echo 'digraph{a->b}' | dot -Tsvg` works, or use --format dot "
        "and draw the graph elsewhere\n",
    )


def test_graphviz_that_cannot_start_is_one_line_with_a_hint(tmp_path: Path) -> None:
    root = write_program(tmp_path / "src")
    dot = tmp_path / "bin" / "dot"
    dot.parent.mkdir()
    dot.write_bytes(b"\x7fELF not really a program")
    dot.chmod(0o755)
    env = {"PATH": f"{dot.parent}{os.pathsep}{os.environ['PATH']}"}
    out = tmp_path / "g.svg"
    run = sgtrace_cli("callgraph", "app", "--source", root, "--no-cache", "-o", out, env=env)
    assert run == Run(
        2,
        "",
        f"Error: Graphviz's dot ({dot}) could not be started (Exec format error); check it "
        "runs (dot -V), or use --format dot and draw the graph elsewhere\n",
    )


# -- the text tree and find ----------------------------------------------------------------------
@pytest.mark.network
def test_readme_tree_fits_100_columns_and_explains_its_labels() -> None:
    run = sgtrace_cli(
        "callgraph", "scheduler.py", "--source", "sglang==0.5.9", "--focus",
        "Scheduler.process_batch_result", "--depth", "2", "--format", "text",
    )  # fmt: skip
    lines = run.stdout.splitlines()
    assert run.code == 0
    assert lines[0] == "# sglang==0.5.9; files under sglang/srt/"
    assert lines[1] == "Scheduler.process_batch_result  managers/scheduler.py:2447"
    assert lines[3:5] == [
        "  2453: SchedulerOutputProcessorMixin.process_batch_result_decode  [mro]",
        "        (managers/scheduler_output_processor_mixin.py:417)",
    ]
    assert max(map(len, lines)) <= WIDTH
    used = sorted({how for line in lines if not line.startswith("#") for how in _labels(line)})
    legend = [line.split()[1] for line in lines if line.startswith("#   [")]
    assert legend == [f"[{how}]" for how in used]


def _labels(line: str) -> list[str]:
    return line.split("  [", 1)[1].split("]", 1)[0].split(",") if "  [" in line else []


def test_every_edge_label_is_explained_in_the_legend_and_the_docs() -> None:
    assert sorted(LEGEND) == sorted(How)
    doc = (Path(__file__).parents[2] / "docs" / "edge-labels.md").read_text(encoding="utf-8")
    rows = [line for line in doc.splitlines() if line.startswith("| `[")]
    assert rows == [f"| `[{how.value}]` | {LEGEND[how]} |" for how in How]


def test_find_lists_a_call_site_once_with_all_its_targets() -> None:
    root = CASES_DIR / "abstract_method_overriders" / "input"
    run = sgtrace_cli("find", "execute", "--source", root, "--no-cache")
    assert run == Run(
        0,
        """\
definitions:
  app/base.py:10  app.base:Backend.execute  (method)
  app/cpu.py:5  app.cpu:CpuBackend.execute  (method)
  app/cpu.py:10  app.cpu:PinnedCpuBackend.execute  (method)
  app/cuda.py:5  app.cuda:CudaBackend.execute  (method)
call sites:
  app/base.py:7  in app.base:Backend.step  -> 4 targets:
      -> app.base:Backend.execute  [mro]
      -> app.cpu:CpuBackend.execute  [override]
      -> app.cpu:PinnedCpuBackend.execute  [override]
      -> app.cuda:CudaBackend.execute  [override]
      return self.execute()
""",
        "",
    )


# -- downloads: pip's noise stays out, progress goes to stderr -----------------------------------
def wheels(folder: Path, versions: list[str]) -> dict[str, str]:
    """A local package index (a folder of wheels) and the pip settings that use it alone."""
    folder.mkdir()
    for version in versions:
        with zipfile.ZipFile(folder / f"fakepkg-{version}-py3-none-any.whl", "w") as archive:
            archive.writestr(
                "fakepkg/core.py",
                "def run():\n    return helper()\n\n\ndef helper():\n    return 1\n",
            )
            archive.writestr(
                f"fakepkg-{version}.dist-info/METADATA", f"Name: fakepkg\nVersion: {version}\n"
            )
            archive.writestr(
                f"fakepkg-{version}.dist-info/WHEEL",
                "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
            )
            archive.writestr(f"fakepkg-{version}.dist-info/RECORD", "")
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(folder), "PIP_CONFIG_FILE": os.devnull}


VERSIONS = [f"0.{minor}.{patch}" for minor in range(1, 6) for patch in range(0, 40)]


def test_missing_release_is_one_line_with_the_newest_and_nearest(tmp_path: Path) -> None:
    env = wheels(tmp_path / "index", VERSIONS)
    cache = tmp_path / "cache"
    run = sgtrace_cli("find", "run", "--source", "fakepkg==0.3.99", "--cache-dir", cache, env=env)
    assert run == Run(
        2,
        "",
        f"downloading fakepkg==0.3.99 from PyPI (once: later runs read {cache}/sources/"
        "fakepkg-0.3.99)\nError: fakepkg 0.3.99 does not exist on the package index (200 "
        "releases; the newest are 0.5.39, 0.5.38, 0.5.37; the nearest 0.4.1, 0.4.0, 0.3.39); "
        "try --source fakepkg==0.5.39\n",
    )


def test_download_reports_progress_on_stderr_only(tmp_path: Path) -> None:
    env = wheels(tmp_path / "index", ["1.2.3"])
    cache = tmp_path / "cache"
    run = sgtrace_cli("find", "helper", "--source", "fakepkg==1.2.3", "--cache-dir", cache, env=env)
    size = (tmp_path / "index" / "fakepkg-1.2.3-py3-none-any.whl").stat().st_size / 1e6
    assert run == Run(
        0,
        "definitions:\n  fakepkg/core.py:5  fakepkg.core:helper  (function)\ncall sites:\n"
        "  fakepkg/core.py:2  in fakepkg.core:run  -> fakepkg.core:helper  [local]\n"
        "      return helper()\n",
        f"downloading fakepkg==1.2.3 from PyPI (once: later runs read {cache}/sources/"
        f"fakepkg-1.2.3)\nunpacking fakepkg-1.2.3-py3-none-any.whl ({size:.1f} MB)\n",
    )
    again = sgtrace_cli("find", "helper", "--source", "fakepkg==1.2.3", "--cache-dir", cache)
    assert again == Run(0, run.stdout, "")  # reused: no download, no message


def test_a_long_download_says_it_is_still_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip takes longer than the 0.05 s between two reports to start, let alone download."""
    for name, value in wheels(tmp_path / "index", ["1.2.3"]).items():
        monkeypatch.setenv(name, value)
    heard: list[str] = []
    (tmp_path / "dest").mkdir()
    wheel = download.pip_fetch_wheel("fakepkg", "1.2.3", tmp_path / "dest", heard.append, 0.05)
    assert wheel == tmp_path / "dest" / "fakepkg-1.2.3-py3-none-any.whl"
    assert heard
    assert heard == [
        f"still downloading fakepkg==1.2.3 ({0.05 * n:.0f} s)" for n in range(1, len(heard) + 1)
    ]
