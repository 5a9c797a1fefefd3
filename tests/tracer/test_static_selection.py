"""The default trace selection found in the static graph: the map's names, each with its role."""

from __future__ import annotations

import pytest

from sgtrace.names import QualName
from sgtrace.sglang import expected_names, family_of_release
from sgtrace.tracer.events import Role
from sgtrace.tracer.selection import HOOK_DECISION
from sgtrace.tracer.static import ROLE_OF, selection_from_source


def test_every_part_of_the_map_has_its_own_role() -> None:
    """Every role but the hook's decision and OTHER is a part of SGLang the map locates."""
    assert sorted(role.value for role in ROLE_OF.values()) == sorted(
        role.value for role in Role if role not in (Role.DECISION, Role.OTHER)
    )


@pytest.mark.network
@pytest.mark.parametrize("version", ["0.5.9", "0.5.16", "0.5.23"])
def test_static_selection_is_the_map_with_roles(sglang_project, version: str) -> None:
    static = selection_from_source(sglang_project(version))
    assert (static.fallbacks, static.missing) == ((), ())
    expected: dict[Role, tuple[QualName, ...]] = {
        ROLE_OF[part]: names for part, names in expected_names(family_of_release(version)).items()
    }
    assert dict(static.names) == {**expected, Role.DECISION: (HOOK_DECISION,)}
    roles = sorted(probe.role.value for probe in static.selection.probes)
    assert roles == sorted(role.value for role in Role if role is not Role.OTHER)
