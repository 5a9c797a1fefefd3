"""Shared fixtures: real SGLang releases from PyPI, downloaded once into a cache; the markers.

The suite runs offline by default (``addopts`` in pyproject.toml deselects ``network``,
``releases`` and ``live``). A test that downloads a release is marked ``network``: those that
use the ``sglang_source`` or ``sglang_project`` fixtures are marked here automatically, and a
``releases`` test is a ``network`` test too. CI selects them explicitly
(``python -m pytest -m "not live"``, the README's test command). While the network tests are not
selected, pip is told to use no index (``PIP_NO_INDEX``), so a test that would download without
its marker fails at once instead of going to PyPI.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from sgtrace.graphs.build import Project
from sgtrace.graphs.source import SourceTree, default_cache_dir, open_source

OLDEST = "0.5.9"
NEWEST = "0.5.23"  # the newest release on PyPI when this was written; all of them: tests/hooks/test_releases.py
RELEASE_FIXTURES = frozenset({"sglang_source", "sglang_project"})


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="Rewrite golden files (tests/graphs/cases/*/expected.json) from the current output "
        "instead of comparing with them (nox -s update-golden).",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``network`` every test that downloads: it uses a release fixture, or is ``releases``."""
    for item in items:
        downloads = RELEASE_FIXTURES & set(getattr(item, "fixturenames", ()))
        if (downloads or item.get_closest_marker("releases")) and not item.get_closest_marker(
            "network"
        ):
            item.add_marker(pytest.mark.network)


@pytest.fixture(autouse=True)
def _offline_unless_network(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tests not marked ``network`` cannot reach PyPI: pip (sgtrace's downloader) gets no index."""
    if request.node.get_closest_marker("network") is None:
        monkeypatch.setenv("PIP_NO_INDEX", "1")


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
