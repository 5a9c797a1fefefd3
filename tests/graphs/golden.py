"""Golden call-graph cases: build a case's graph, compare its whole JSON with ``expected.json``.

A case is one directory, ``tests/graphs/cases/<scenario>/``, holding ``input/<pkg>/...`` (a small
program of our own), ``expected.json`` (the graph of the whole package as ``sgtrace callgraph
--format json`` prints it) and ``README.md`` (what the case shows). A mismatch fails with a
unified diff and says how to accept the new output: ``nox -s update-golden``, which runs pytest
with ``--update-golden`` so that :func:`check_golden` rewrites the file instead of comparing.

>>> case = Case(CASES_DIR / "method_via_mro")
>>> case.name, case.expected_path.name
('method_via_mro', 'expected.json')
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import pytest

from sgtrace.graphs.build import Project, build_call_graph
from sgtrace.graphs.model import CallGraph
from sgtrace.graphs.render import render_json
from sgtrace.graphs.source import SourceTree, open_source

CASES_DIR = Path(__file__).parent / "cases"
UPDATE_HINT = "run `nox -s update-golden` to accept"


@dataclass(frozen=True)
class Case:
    """One golden case directory."""

    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def input_dir(self) -> Path:
        return self.path / "input"

    @property
    def expected_path(self) -> Path:
        return self.path / "expected.json"

    @property
    def readme(self) -> Path:
        return self.path / "README.md"

    @cached_property
    def tree(self) -> SourceTree:
        """The case's input as a source tree, labelled independently of where the repo lies."""
        return replace(open_source(self.input_dir), label=f"cases/{self.name}/input")

    def project(self) -> Project:
        """A fresh project over the input, with no summary cache."""
        return Project(self.tree, use_cache=False)

    def graph(self) -> CallGraph:
        """The call graph of every module of the input's packages."""
        return build_call_graph(self.project(), list(self.tree.packages))

    def render(self) -> str:
        return render_json(self.graph())

    def input_text(self) -> str:
        """Every input file with a header line, for failure messages."""
        return describe_files(self.input_dir)


def all_cases() -> list[Case]:
    """The case directories, sorted by scenario name."""
    return [Case(p) for p in sorted(CASES_DIR.iterdir()) if p.is_dir()]


def describe_files(root: Path) -> str:
    """The ``.py`` files under ``root``, each under a ``# path`` header."""
    parts = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        parts.append(f"# {path.relative_to(root).as_posix()}\n{text}")
    return "\n".join(parts)


def golden_diff(expected: str, actual: str, name: str) -> str:
    """The unified diff from ``expected`` to ``actual``; empty when they are equal."""
    return "".join(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            fromfile=f"{name} (expected)",
            tofile=f"{name} (actual)",
        )
    )


def check_golden(actual: str, expected_path: Path, update: bool) -> None:
    """Compare ``actual`` with the golden file, or rewrite the file when ``update`` is set.

    Fails (``pytest.fail``) with a unified diff and :data:`UPDATE_HINT` on a mismatch, and with
    the same hint when the golden file does not exist yet.
    """
    if update:
        if not expected_path.is_file() or expected_path.read_text(encoding="utf-8") != actual:
            expected_path.write_text(actual, encoding="utf-8")
        return
    if not expected_path.is_file():
        pytest.fail(f"no golden file {expected_path}; {UPDATE_HINT}", pytrace=False)
    expected = expected_path.read_text(encoding="utf-8")
    if expected != actual:
        diff = golden_diff(expected, actual, expected_path.parent.name)
        pytest.fail(f"golden mismatch for {expected_path}:\n{diff}\n{UPDATE_HINT}", pytrace=False)
