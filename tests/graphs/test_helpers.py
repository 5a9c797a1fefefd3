"""The golden-file and edge assertions fail the way a reader needs: diff, hint, input, actual."""

from __future__ import annotations

from pathlib import Path

import pytest

from sgtrace.graphs.model import CallGraph, CallSite, Node, Unresolved, UnresolvedCall
from sgtrace.names import QualName
from tests.graphs.golden import UPDATE_HINT, check_golden
from tests.graphs.helpers import assert_edges, assert_unresolved

RUN = QualName("app.main", "run")
HELPER = QualName("app.util", "helper")


def small_graph() -> CallGraph:
    nodes = {
        RUN: Node(RUN, "function", "app/main.py", 4),
        HELPER: Node(HELPER, "function", "app/util.py", 1),
    }
    site = CallSite("app/main.py", 5, RUN, HELPER, "helper()", None, "import")
    missing = UnresolvedCall("app/main.py", 6, RUN, "other", Unresolved.UNKNOWN_NAME, "other")
    return CallGraph(nodes, [site], [missing], (RUN,), "test")


def failure(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    return str(excinfo.value)


def test_check_golden_passes_on_equal_text(tmp_path: Path) -> None:
    golden = tmp_path / "expected.json"
    golden.write_text("{}\n", encoding="utf-8")
    check_golden("{}\n", golden, update=False)


def test_check_golden_mismatch_shows_diff_and_hint(tmp_path: Path) -> None:
    golden = tmp_path / "case" / "expected.json"
    golden.parent.mkdir()
    golden.write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(pytest.fail.Exception) as excinfo:
        check_golden("a\nc\n", golden, update=False)
    assert failure(excinfo) == (
        f"golden mismatch for {golden}:\n"
        "--- case (expected)\n+++ case (actual)\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n\n"
        f"{UPDATE_HINT}"
    )
    assert UPDATE_HINT == "run `nox -s update-golden` to accept"
    assert golden.read_text(encoding="utf-8") == "a\nb\n"


def test_check_golden_missing_file_says_how_to_create(tmp_path: Path) -> None:
    golden = tmp_path / "expected.json"
    with pytest.raises(pytest.fail.Exception) as excinfo:
        check_golden("{}\n", golden, update=False)
    assert failure(excinfo) == f"no golden file {golden}; {UPDATE_HINT}"


def test_check_golden_update_writes_the_actual_text(tmp_path: Path) -> None:
    golden = tmp_path / "expected.json"
    golden.write_text("old\n", encoding="utf-8")
    check_golden("new\n", golden, update=True)
    assert golden.read_text(encoding="utf-8") == "new\n"
    check_golden("new\n", golden, update=False)


def test_assert_edges_accepts_present_edge_and_how() -> None:
    graph = small_graph()
    assert_edges(graph, {("app.main:run", "app.util:helper", "import")})
    assert_edges(
        graph, {("app.main:run", "app.util:helper")}, {("app.util:helper", "app.main:run")}
    )


def test_assert_edges_failure_prints_input_expected_and_actual() -> None:
    with pytest.raises(pytest.fail.Exception) as excinfo:
        assert_edges(
            small_graph(),
            {("app.main:run", "app.util:helper", "mro")},
            {("app.main:run", "app.util:helper")},
            input_text="# app/main.py\nhelper()\n",
        )
    assert failure(excinfo) == "\n".join(
        [
            "call graph edges differ from what was expected",
            "input:",
            "# app/main.py\nhelper()\n",
            "expected edges:",
            "  app.main:run -> app.util:helper [mro]",
            "expected absent:",
            "  app.main:run -> app.util:helper",
            "actual edges from those callers:",
            "  app.main:run -> app.util:helper [import] @5",
            "missing:",
            "  app.main:run -> app.util:helper [mro]",
            "unexpected:",
            "  app.main:run -> app.util:helper",
        ]
    )


def test_assert_unresolved_is_exact() -> None:
    graph = small_graph()
    assert_unresolved(graph, [(6, "app.main:run", "other", "unknown-name")])
    with pytest.raises(pytest.fail.Exception) as excinfo:
        assert_unresolved(graph, [])
    assert failure(excinfo) == "\n".join(
        [
            "unresolved calls differ from what was expected",
            "expected:",
            "actual:",
            "  (6, 'app.main:run', 'other', 'unknown-name')",
        ]
    )
