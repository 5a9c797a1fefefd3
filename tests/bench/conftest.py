"""Shared fixtures of the benchmark tests."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def bench_module(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], ModuleType]:
    """Import a module of ``bench/`` by name (``bench/`` on the path for the test, as the
    benchmark scripts have it when run)."""
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module
