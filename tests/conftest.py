"""Shared fixtures: real SGLang releases from PyPI, downloaded once into a cache."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from sgtrace.graphs.build import Project
from sgtrace.graphs.source import SourceTree, default_cache_dir, open_source

OLDEST = "0.5.9"
NEWEST = "0.5.23"  # the newest release on PyPI when this was written; see tests/releases.py


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="Rewrite golden files (tests/graphs/cases/*/expected.json) from the current output "
        "instead of comparing with them (nox -s update-golden).",
    )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    """Whether golden files are rewritten (``--update-golden``) rather than compared."""
    return bool(request.config.getoption("--update-golden"))


def _cache_dir() -> Path:
    """Where release sources are cached across test runs (CI keeps ~/.cache between steps)."""
    return Path(os.environ.get("SGTRACE_TEST_CACHE", default_cache_dir()))


@pytest.fixture(scope="session")
def sglang_source() -> Callable[[str], SourceTree]:
    """``sglang_source("0.5.9")`` -> the release's source tree, fetched from PyPI once."""
    trees: dict[str, SourceTree] = {}

    def get(version: str) -> SourceTree:
        if version not in trees:
            trees[version] = open_source(f"sglang=={version}", _cache_dir())
        return trees[version]

    return get


@pytest.fixture(scope="session")
def sglang_project(sglang_source: Callable[[str], SourceTree]) -> Callable[[str], Project]:
    """``sglang_project("0.5.9")`` -> a :class:`Project` over that release (summaries cached)."""
    projects: dict[str, Project] = {}

    def get(version: str) -> Project:
        if version not in projects:
            projects[version] = Project(sglang_source(version), _cache_dir())
        return projects[version]

    return get
