"""The collection passes on one module: call lines, callee chains and guards.

Line numbers come from an ordinal pairing with the stdlib parser, with libcst's own positions as
the fallback (``lines.py``); both paths must give the same summary.
"""

from __future__ import annotations

from textwrap import dedent

import libcst as cst
import pytest

from sgtrace.graphs.collect import collect_module
from sgtrace.graphs.summary import ModuleSummary

SOURCE = dedent("""\
    import functools


    @functools.lru_cache(
        maxsize=None,
    )
    def run(batch, flag):
        if batch.is_decode():
            decode(
                batch,
                prepare(batch),
            )
        elif flag:
            extend(batch)
        else:
            while batch.pending():
                step(lambda: inner(batch))
        squares = [square(x) for x in batch]
        return squares


    class Worker:
        @staticmethod
        def make():
            return Worker()
    """)

EXPECTED_CALLS = {
    "<module>": [(4, "functools.lru_cache", None)],
    "run": [
        (8, "batch.is_decode", None),
        (9, "decode", "batch.is_decode()"),
        (11, "prepare", "batch.is_decode()"),
        (14, "extend", "not (batch.is_decode()) and flag"),
        (16, "batch.pending", "not (batch.is_decode()) and not (flag)"),
        (17, "step", "not (batch.is_decode()) and not (flag) and batch.pending()"),
        (18, "square", None),
    ],
    "run.<locals>.<lambda>": [(17, "inner", None)],
    "Worker.make": [(25, "Worker", None)],
}


def calls_by_scope(summary: ModuleSummary) -> dict[str, list[tuple[int, str, str | None]]]:
    found = {"<module>": [(c.line, c.spelled, c.guard) for c in summary.calls]}
    for qual, info in summary.functions.items():
        if info.calls:
            found[qual] = [(c.line, c.spelled, c.guard) for c in info.calls]
    return found


def test_call_lines_chains_and_guards() -> None:
    summary = collect_module(SOURCE, "app.run", "app/run.py", False)
    assert summary.parse_error is None
    assert calls_by_scope(summary) == EXPECTED_CALLS
    assert {q: f.line for q, f in summary.functions.items()} == {
        "run": 7,
        "run.<locals>.<lambda>": 17,
        "Worker.make": 24,
    }
    assert summary.classes["Worker"].line == 22


def test_position_fallback_gives_the_same_lines() -> None:
    """A statement the stdlib parser of some Pythons rejects (a PEP 695 alias) must not move
    any line: the libcst-position fallback is used where the ordinal table is unavailable."""
    source = SOURCE + "\n\ntype Alias = int\n\n\ndef later():\n    return run(1, 2)\n"
    summary = collect_module(source, "app.run", "app/run.py", False)
    expected = {**EXPECTED_CALLS, "later": [(32, "run", None)]}
    assert calls_by_scope(summary) == expected
    assert summary.functions["later"].line == 31


def test_unparsable_source_gives_an_empty_summary_with_the_error() -> None:
    summary = collect_module("def broken(:\n    pass\n", "app.broken", "app/broken.py", False)
    assert (summary.functions, summary.classes, summary.calls) == ({}, {}, ())
    assert summary.parse_error is not None
    assert summary.parse_error.startswith("app/broken.py:")


def test_parsing_without_validation_gives_the_same_summary_and_restores_it() -> None:
    """Pool workers skip libcst's per-node validation while parsing: same summary, and libcst
    validates again afterwards, also after a parse that failed."""
    check = cst.CSTNode.__post_init__
    trusted = collect_module(SOURCE, "app.run", "app/run.py", False, validate=False)
    assert trusted == collect_module(SOURCE, "app.run", "app/run.py", False)
    broken = collect_module("def broken(:\n", "app.b", "app/b.py", False, validate=False)
    assert broken.parse_error is not None
    assert cst.CSTNode.__post_init__ is check
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")
