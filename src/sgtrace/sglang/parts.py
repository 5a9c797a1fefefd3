"""The functions of SGLang's decode path the tracer records, found as the hook's sites are.

Each :class:`~sgtrace.sglang.anchors.Part` is located through the graph engine from the
anchors of :mod:`~sgtrace.sglang.anchors`: the decode-result handler is the decide site's
callee (:func:`~sgtrace.sglang.locate.locate_decide`); the worker's forward is upstream's
switch site's caller; draft, verify, draft extends and target forward are what that forward, or
one of the worker's own helpers it calls (0.5.23 moved prefill into one), calls by those names;
the draft forward is what the draft calls. A part the graph does not show falls back on the map's names
that the release defines (:func:`~sgtrace.sglang.anchors.expected_names` over every family),
and is reported as such.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sgtrace.errors import HookSiteNotFoundError
from sgtrace.graphs.build import Project
from sgtrace.names import QualName
from sgtrace.sglang.anchors import (
    DRAFT_CALLEE,
    SPECULATIVE_PACKAGE,
    STEP,
    SWITCH_CALLER,
    WORKER_CALLEES,
    Part,
    expected_names,
)
from sgtrace.sglang.family import Family
from sgtrace.sglang.locate import locate_decide


@dataclass(frozen=True)
class PartsFound:
    """The functions of each part in one release, and where they came from."""

    names: Mapping[Part, tuple[QualName, ...]]
    fallbacks: tuple[Part, ...]  # not shown by the graph: the map's names, defined here
    missing: tuple[Part, ...]  # neither shown by the graph nor defined under the map's names


def _callees(project: Project, caller: QualName, short: str) -> list[QualName]:
    return sorted({s.callee for s in project.callees(caller) if s.callee.short == short})


def _decode_result(project: Project) -> tuple[QualName, ...]:
    try:
        return (locate_decide(project, project.tree.label).callee,)
    except HookSiteNotFoundError:
        return ()


def _defined(project: Project, names: Iterable[QualName]) -> tuple[QualName, ...]:
    return tuple(name for name in names if project.node(name) is not None)


def locate_parts(project: Project) -> dict[Part, tuple[QualName, ...]]:
    """Each part's functions as the call graph of ``project`` shows them (possibly none)."""
    parts = {
        Part.STEP: _defined(project, [STEP]),
        Part.DECODE_RESULT: _decode_result(project),
    }
    forward = _defined(project, [SWITCH_CALLER])
    parts[Part.SPEC_FORWARD] = forward
    owner = SWITCH_CALLER.owner
    helpers = [*forward]
    for spec in forward:
        helpers += sorted({s.callee for s in project.callees(spec) if s.callee.owner == owner})
    for part, short in WORKER_CALLEES.items():
        found = {c for h in helpers for c in _callees(project, h, short) if c not in forward}
        if part is Part.TARGET_FORWARD:
            found = {c for c in found if not c.module.startswith(SPECULATIVE_PACKAGE)}
        parts[part] = tuple(sorted(found))
    parts[Part.DRAFT_FORWARD] = tuple(
        c for d in parts[Part.DRAFT] for c in _callees(project, d, DRAFT_CALLEE)
    )
    return parts


def find_parts(project: Project) -> PartsFound:
    """Every part of the release in ``project``: located, else the map's names it defines."""
    located = locate_parts(project)
    names: dict[Part, tuple[QualName, ...]] = {}
    fallbacks: list[Part] = []
    missing: list[Part] = []
    for part in Part:
        if located[part]:
            names[part] = located[part]
            continue
        known = sorted({n for family in Family for n in expected_names(family)[part]})
        names[part] = _defined(project, known)
        (fallbacks if names[part] else missing).append(part)
    return PartsFound(names, tuple(fallbacks), tuple(missing))
