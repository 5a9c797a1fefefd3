"""The default trace selection, derived from the static call graph of the analysed release.

The functions are found by the SGLang map's locator (:func:`sgtrace.sglang.parts.find_parts`),
the one that finds the hook's sites; this module gives each part its tracer :class:`Role` and
adds the hook's own decision record (:data:`~sgtrace.tracer.selection.HOOK_DECISION`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sgtrace.graphs.build import Project
from sgtrace.names import QualName
from sgtrace.sglang.anchors import Part
from sgtrace.sglang.parts import find_parts
from sgtrace.tracer.events import Role
from sgtrace.tracer.selection import HOOK_DECISION, Selection, default_selection

ROLE_OF: Mapping[Part, Role] = {
    Part.STEP: Role.STEP,
    Part.DECODE_RESULT: Role.DECODE_RESULT,
    Part.SPEC_FORWARD: Role.SPEC_FORWARD,
    Part.DRAFT: Role.DRAFT,
    Part.DRAFT_FORWARD: Role.DRAFT_FORWARD,
    Part.VERIFY: Role.VERIFY,
    Part.DRAFT_EXTEND_PREFILL: Role.DRAFT_EXTEND_PREFILL,
    Part.DRAFT_EXTEND_DECODE: Role.DRAFT_EXTEND_DECODE,
    Part.TARGET_FORWARD: Role.TARGET_FORWARD,
}


@dataclass(frozen=True)
class StaticSelection:
    """The default selection of one release, and which roles the graph did not show."""

    selection: Selection
    names: Mapping[Role, tuple[QualName, ...]]
    fallbacks: tuple[Role, ...]  # the map's names, defined in the release but not located
    missing: tuple[Role, ...]  # nothing found: not recorded


def selection_from_source(project: Project) -> StaticSelection:
    """The default selection for the release in ``project``."""
    found = find_parts(project)
    names = {ROLE_OF[part]: functions for part, functions in found.names.items() if functions}
    names[Role.DECISION] = (HOOK_DECISION,)
    return StaticSelection(
        default_selection(names),
        names,
        tuple(ROLE_OF[part] for part in found.fallbacks),
        tuple(ROLE_OF[part] for part in found.missing),
    )
