"""Full summaries from ``ast`` (outline + ``callsites.py``) equal the libcst passes' summaries.

The libcst collector (``collect.py``) is the reference. The ``ast`` path must find the same
call sites (scope, order, line, root, attributes, guard text) on every file compared here:
the golden cases, sgtrace's own source, and (network) whole SGLang releases.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sgtrace.graphs.callsites import PARITY_SCHEMA, full_summary
from sgtrace.graphs.codec import Codec
from sgtrace.graphs.collect import collect_module
from sgtrace.graphs.parse import ParseJob, summarise
from sgtrace.graphs.summary import ModuleSummary, RawCall

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "graphs" / "cases"


def fast(source: str, rel: str) -> ModuleSummary:
    return full_summary(source, ast.parse(source), "m", rel, False)


def calls_by_scope(summary: ModuleSummary) -> dict[str, tuple[RawCall, ...]]:
    found = {"": summary.calls}
    found.update({q: f.calls for q, f in summary.functions.items()})
    found.update({f"class {q}": c.calls for q, c in summary.classes.items()})
    return found


def differing(paths: list[Path], root: Path) -> list[str]:
    """Files whose call sites differ between the two collectors, with the first difference."""
    out = []
    for path in paths:
        rel = path.relative_to(root).as_posix()
        source = path.read_bytes().decode("utf-8-sig", errors="replace")
        reference = collect_module(source, "m", rel, False)
        if reference.parse_error is not None:
            continue
        mine = fast(source, rel)
        want, got = calls_by_scope(reference), calls_by_scope(mine)
        if want != got:
            scope = next(s for s in (*want, *got) if want.get(s) != got.get(s))
            out.append(f"{rel} [{scope}]: libcst {want.get(scope)} ast {got.get(scope)}")
        elif mine != reference:
            out.append(f"{rel}: the same calls, other definitions or value facts")
    return out


def test_golden_cases_and_own_source_have_the_same_calls() -> None:
    paths = sorted(CASES.rglob("*.py")) + sorted((ROOT / "src").rglob("*.py"))
    assert len(paths) > 100
    assert differing(paths, ROOT) == []


def test_guards_decorators_and_dynamic_roots_match_libcst() -> None:
    source = """\
import functools


@functools.lru_cache(maxsize=make_size())
def outer(x=default(), *, y: kind() = None) -> ret():
    if (ready(x)
            and  other(x)):  # a comment
        go(x)
    elif x:
        stop()
    else:
        (lambda: fallback())()
        (handlers or defaults)[x](y)
    while ( more() ):
        step().then(x)
    if (  # why
        ready(x)  # first
        or (x)  # second (with parentheses)
    ):
        (  # a comment before the callee
            handlers  # and after
        )[x]()
    else:
        done()

    class Inner(base(), metaclass=meta()):
        attr = field()

        @wrap(x)
        def method(self):
            super().method()
            return [f(i) for i in items() if keep(i)]
    return f"{fmt(x)!r:>{width()}}"
"""
    reference = collect_module(source, "m", "m.py", False)
    assert calls_by_scope(fast(source, "m.py")) == calls_by_scope(reference)
    guards = {c.guard for c in reference.functions["outer"].calls}
    assert "(ready(x) and other(x))" in guards  # the parentheses, not the comment after them
    assert "( # why ready(x) # first or (x) # second (with parentheses) )" in guards


def test_values_lambdas_and_implicit_calls_match_libcst() -> None:
    """The value forms of the arguments (names, ``self`` attributes, lambdas, ``partial``,
    tables, containers, starred ones skipped), calls inside lambdas (their own scope and
    guards), decorators' arguments, subscript roots, and ``with``/``for``/decorator calls."""
    source = """\
from functools import partial


@register(handler=on_event, key=lambda e: e.kind())
class Table:
    handlers = {"a": handle_a, "b": handle_b}

    @app.route(lambda r: check(r), self_ok)
    def run(self, key, *rest, **kw):
        if key:
            self.handlers[key](self.on_done, partial(finish, key))
            dispatch(*rest, key, [self.run, None, (lambda: go())], cb=lambda x: (
                x.ready() if ready(x) else x.wait()
            ), **kw)
        table[key](partial(func=step), *rest)
        run_all([handle_a, *rest], {handle_b}, fn=(self.a, self.b)[key])
        with self.lock, open(key) as f:
            for item in self.items:
                f.write(item)
        return (lambda y=make(): y.done())()


@cache
def helper(cb, n=default()):
    handlers = [lambda: cb(), lambda: (lambda: inner())()]
    return handlers[n]()
"""
    reference = collect_module(source, "m", "m.py", False)
    mine = fast(source, "m.py")
    assert calls_by_scope(mine) == calls_by_scope(reference)
    assert mine == reference
    scopes = calls_by_scope(reference)
    assert any(c.args for c in scopes["class Table"] + scopes[""])  # the decorators' arguments
    assert any(c.implicit for c in scopes["Table.run"])  # with, for
    assert "helper.<locals>.<lambda>.<locals>.<lambda>" in scopes


def test_summarise_uses_the_ast_path_and_libcst_reports_what_ast_cannot_parse(
    tmp_path: Path,
) -> None:
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text("def f():\n    if a:\n        g()\n")
    bad.write_text("def f(:\n    pass\n")
    summary = summarise(ParseJob(str(good), "good", "good.py", False, True, "k"))
    assert summary == collect_module(good.read_text(), "good", "good.py", False)
    error = summarise(ParseJob(str(bad), "bad", "bad.py", False, True, "k")).parse_error
    assert error is not None and error.startswith("bad.py:")  # libcst's message and position


def test_the_ast_path_was_checked_against_the_current_summary_classes() -> None:
    """``callsites.PARITY_SCHEMA`` names the shape of the summary classes the ``ast`` path
    matches. If this fails, fields were added to the summary dataclasses: until the outline and
    ``callsites.py`` collect them as ``collect.py`` does, full summaries come from libcst only
    (correct, about five times slower on a whole package). Extend them, check with this file
    (and ``-m network``), then set PARITY_SCHEMA to the digest below."""
    assert Codec().schema(ModuleSummary) == PARITY_SCHEMA


@pytest.mark.network
@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_a_whole_release_has_the_same_calls(sglang_source, version: str) -> None:
    tree = sglang_source(version)
    paths = sorted((tree.root / "sglang").rglob("*.py"))
    assert len(paths) > 1000
    assert differing(paths, tree.root) == []
