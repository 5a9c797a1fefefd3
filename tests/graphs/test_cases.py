"""Golden call graphs: one case per resolution rule and one per negative twin.

Each case's whole JSON graph is compared with its ``expected.json``; ``nox -s update-golden``
(pytest ``--update-golden``) accepts a new output. The rule each case pins down is also asserted
edge by edge in ``test_resolution.py``, so that accepting a wrong golden file is still caught.
"""

from __future__ import annotations

import pytest

from tests.graphs.golden import Case, all_cases, check_golden

CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_matches_golden(case: Case, update_golden: bool) -> None:
    check_golden(case.render(), case.expected_path, update_golden)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_layout(case: Case) -> None:
    """input/<pkg>/ with an __init__.py, and a README.md titled with the scenario name."""
    packages = sorted(p.name for p in case.input_dir.iterdir() if p.is_dir())
    assert [p for p in packages if (case.input_dir / p / "__init__.py").is_file()] == packages
    assert packages, f"{case.name}: no package under input/"
    assert case.readme.read_text(encoding="utf-8").splitlines()[0] == f"# {case.name}"


def test_case_build_is_deterministic() -> None:
    """Two fresh builds of the largest case render byte for byte the same."""
    case = max(CASES, key=lambda c: len(c.input_text()))
    assert case.render() == case.render()
