"""Release numbers to families, by the map's release boundaries (no download needed)."""

from __future__ import annotations

import pytest

from sgtrace.errors import SgtraceError
from sgtrace.sglang.family import FIRST_RELEASES, Family, family_of_release, release_key
from tests.sglang.releases import RELEASES


@pytest.mark.parametrize(
    ("version", "family"),
    [
        ("0.5.9", Family.SCHEDULER_MIXINS),
        ("0.5.12.post1", Family.SCHEDULER_MIXINS),
        ("0.5.13", Family.RUNTIME_STATES),
        ("0.5.13.post1", Family.RUNTIME_STATES),
        ("0.5.14", Family.ZERO_STEP_STATES),
        ("0.5.23rc1", Family.ZERO_STEP_STATES),
        ("0.6.0", Family.ZERO_STEP_STATES),
    ],
)
def test_family_of_a_release(version: str, family: Family) -> None:
    assert family_of_release(version) is family


@pytest.mark.parametrize(("version", "message"), [("0.5.8", "predates"), ("latest", "not an")])
def test_family_of_an_unknown_release_is_refused(version: str, message: str) -> None:
    with pytest.raises(SgtraceError, match=message):
        family_of_release(version)


def test_every_family_starts_at_a_checked_release_in_order() -> None:
    firsts = [FIRST_RELEASES[family] for family in Family]
    assert all(first in RELEASES for first in firsts)
    assert firsts == sorted(firsts, key=release_key)
