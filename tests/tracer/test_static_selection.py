"""The default trace selection found in the static graph equals the built-in table."""

from __future__ import annotations

import pytest

from sgtrace.tracer.builtin import builtin_names, family_for
from sgtrace.tracer.static import selection_from_source


@pytest.mark.network
@pytest.mark.parametrize("version", ["0.5.9", "0.5.16", "0.5.23"])
def test_static_selection_equals_the_builtin_table(sglang_project, version: str) -> None:
    family = family_for(version)
    static = selection_from_source(sglang_project(version), family)
    assert static.fallbacks == ()
    assert {role: tuple(names) for role, names in static.names.items()} == {
        role: tuple(names) for role, names in builtin_names(family).items()
    }
