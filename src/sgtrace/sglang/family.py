"""SGLang's release families: ranges of releases that share the structure sgtrace relies on.

A family is recognised in a release's source by structure (:mod:`~sgtrace.sglang.locate`), never
by its version number; the first release of each family is data, kept here for messages and
checked against the structure of every release by ``tests/sglang/test_map_releases.py``.

Upstream changed two things at 0.5.13 and one at 0.5.14, which is why two readings of "the
family" once disagreed (0.5.13 for the scheduler's layout, 0.5.14 for the zero-step state):

* :attr:`Family.SCHEDULER_MIXINS` (0.5.9 to 0.5.12.post1): the decode result is handled by a
  ``Scheduler`` mixin; the EAGLE v2 worker has no runtime states (its decode branch verifies).
* :attr:`Family.RUNTIME_STATES` (0.5.13, 0.5.13.post1): the decode result is handled by a
  scheduler component; the worker's decode branch activates one of upstream's runtime states
  (``activate_step_by_batch``), none of which runs zero draft steps.
* :attr:`Family.ZERO_STEP_STATES` (0.5.14 and later): as above, plus upstream's zero-step state
  (a one-token verify, ``_build_trivial_verify_input``), which its ``--speculative-adaptive``
  switches to (``sgtrace validate`` has rules for it).

The hook switches on every family alike, through the scheduler's plain decode path
(:mod:`sgtrace.sglang.plain_names`).

>>> family_of_release("0.5.13.post1")
<Family.RUNTIME_STATES: 'runtime-states'>
>>> Family.ZERO_STEP_STATES.first_release
'0.5.14'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import Enum

from sgtrace.errors import SgtraceError

NEWEST_KNOWN = "0.5.23"  # the newest release the map was checked on


class Family(Enum):
    """A range of SGLang releases sharing the structure the hook and the tracer rely on."""

    SCHEDULER_MIXINS = "scheduler-mixins"
    RUNTIME_STATES = "runtime-states"
    ZERO_STEP_STATES = "zero-step-states"

    @property
    def first_release(self) -> str:
        """The first SGLang release of the family (data, checked by the release walk)."""
        return FIRST_RELEASES[self]


FIRST_RELEASES: Mapping[Family, str] = {
    Family.SCHEDULER_MIXINS: "0.5.9",
    Family.RUNTIME_STATES: "0.5.13",
    Family.ZERO_STEP_STATES: "0.5.14",
}

_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:\.?(?:post|rc|dev)\d*)*")


def release_key(version: str) -> tuple[int, int, int]:
    """The numbers of an SGLang release (``0.5.12.post1`` -> ``(0, 5, 12)``), for ordering."""
    match = _RELEASE.fullmatch(version.strip())
    if match is None:
        raise SgtraceError(f"{version!r} is not an SGLang release number such as 0.5.16")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def family_of_release(version: str) -> Family:
    """The family a release number falls in, by :data:`FIRST_RELEASES`; 0.5.9 or newer."""
    key = release_key(version)
    started = [f for f in Family if release_key(f.first_release) <= key]
    if not started:
        raise SgtraceError(
            f"SGLang {version} predates the EAGLE v2 names sgtrace knows "
            f"({Family.SCHEDULER_MIXINS.first_release} and newer)"
        )
    return max(started, key=lambda f: release_key(f.first_release))
