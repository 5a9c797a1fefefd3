"""``sgtrace find`` end to end: exit 0 when found, 1 with suggestions when not found, 2 on
usage errors."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.cli.support import sgtrace


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
