"""The SGLang map on every release from 0.5.9 to 0.5.23: names, families, located parts.

Downloads each release once (``sglang_source`` fixture of tests/conftest.py, cached). The
family is read from each release's structure by the locator and must equal the family its
number falls in by the map's release boundaries (``Family.first_release``), so the boundaries
are checked on both sides: the last release of a family and the first of the next.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sgtrace.graphs.build import Project
from sgtrace.graphs.source import SourceTree
from sgtrace.sglang import Part, expected_names, family_of_release, find_parts, locate, map_names
from sgtrace.sglang.anchors import switch_target
from tests.sglang.releases import RELEASES, defined_in_source

pytestmark = [pytest.mark.releases, pytest.mark.network]


@pytest.mark.parametrize("version", RELEASES)
def test_every_name_of_the_map_is_defined_in_its_family(
    version: str, sglang_source: Callable[[str], SourceTree]
) -> None:
    root = sglang_source(version).root
    family = family_of_release(version)
    missing = [str(name) for name in map_names(family) if not defined_in_source(root, name)]
    assert missing == [], f"SGLang {version} ({family.value}) lacks names of the map: {missing}"


@pytest.mark.parametrize("version", RELEASES)
def test_the_structure_of_every_release_shows_its_family_and_parts(
    version: str,
    sglang_source: Callable[[str], SourceTree],
    sglang_project: Callable[[str], Project],
) -> None:
    family = family_of_release(version)
    project = sglang_project(version)
    found = locate(project, sglang_source(version).label)
    assert (found.family, (found.decide.callee,), found.switch.callee) == (
        family,
        expected_names(family)[Part.DECODE_RESULT],
        switch_target(family),
    ), found.family_reason
    parts = find_parts(project)
    assert (parts.fallbacks, parts.missing) == ((), ())
    assert dict(parts.names) == expected_names(family)
