"""Fixtures of the tracer tests (helpers live in ``tracer_support``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from tracer_support import FakeRun, find_python, run_fakeserve_into


@pytest.fixture(scope="session")
def python312() -> str:
    """A Python with ``sys.monitoring``; the test is skipped where there is none."""
    python = find_python((3, 12))
    if python is None:
        pytest.skip("no Python 3.12+ found (PATH, pyenv) for the sys.monitoring backend")
    return python


@pytest.fixture
def run_fakeserve(tmp_path: Path) -> Callable[..., FakeRun]:
    """``run_fakeserve(python, plan=..., faults=...)``: a traced fakeserve run in ``tmp_path``."""
    counter = iter(range(1000))

    def run(*args: object, **kwargs: object) -> FakeRun:
        return run_fakeserve_into(tmp_path / f"trace{next(counter)}", *args, **kwargs)  # type: ignore[arg-type]

    return run


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``recorded(*faults, plan=..., decide=...)``: a fakeserve trace directory, recorded once."""
    cache: dict[tuple[tuple[str, ...], str, str], Path] = {}

    def get(*faults: str, plan: str = "2,2,8,8,2", decide: str = "in-step") -> Path:
        key = (faults, plan, decide)
        if key not in cache:
            out = tmp_path_factory.mktemp("recorded") / "trace"
            run = run_fakeserve_into(out, plan=plan, faults=faults, decide=decide)
            assert "killed -9 -9" in run.stdout, str(run)
            cache[key] = out
        return cache[key]

    return get
