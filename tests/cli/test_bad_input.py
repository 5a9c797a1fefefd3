"""``sgtrace callgraph`` and ``find`` on bad input: unparsable files, missing targets and
sources, no sglang installed; exit 2 (could not run) with an actionable message, ``--debug``
re-raises."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sgtrace.cli import main
from tests.cli.support import run, sgtrace, short_edges


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
