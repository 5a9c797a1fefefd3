"""The default trace selection, derived from the static call graph of the analysed release.

Roles are located by structure, as ``inject-hook`` locates its sites: the decode-result handler
is what ``Scheduler.process_batch_result`` calls under ``is_decode()``; the speculative worker's
draft, verify, draft extends and target forward are what ``EAGLEWorkerV2.forward_batch_generation``
calls, by short name; the draft forward is what the draft calls. A role the graph does not find
falls back to the built-in table for the release family, and the fallback is reported.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sgtrace.graphs.build import Project
from sgtrace.graphs.find import find_definitions
from sgtrace.names import QualName
from sgtrace.tracer.builtin import Family, builtin_names
from sgtrace.tracer.events import Role
from sgtrace.tracer.selection import HOOK_DECISION, Selection, default_selection

_SPEC_CALLEES = {
    Role.DRAFT: "draft",
    Role.VERIFY: "verify",
    Role.DRAFT_EXTEND_PREFILL: "_draft_extend_for_prefill",
    Role.DRAFT_EXTEND_DECODE: "_draft_extend_for_decode",
    Role.TARGET_FORWARD: "forward_batch_generation",
}


@dataclass(frozen=True)
class StaticSelection:
    selection: Selection
    names: dict[Role, tuple[QualName, ...]]
    fallbacks: tuple[Role, ...]  # roles taken from the built-in table


def _one(project: Project, name: str, module_suffix: str) -> QualName | None:
    found = [
        d.name for d in find_definitions(project, name) if d.name.module.endswith(module_suffix)
    ]
    return found[0] if found else None


def _callees(project: Project, caller: QualName | None, short: str) -> Iterable[QualName]:
    if caller is None:
        return ()
    return sorted({s.callee for s in project.callees(caller) if s.callee.short == short})


def locate_roles(project: Project) -> dict[Role, tuple[QualName, ...]]:
    """Each role's functions as the static graph of ``project`` finds them (possibly empty)."""
    roles: dict[Role, tuple[QualName, ...]] = {}
    run_batch = _one(project, "Scheduler.run_batch", "managers.scheduler")
    roles[Role.STEP] = (run_batch,) if run_batch else ()
    result = _one(project, "Scheduler.process_batch_result", "managers.scheduler")
    decode = (
        [
            s.callee
            for s in project.callees(result)
            if s.callee.short == "process_batch_result_decode" and "is_decode()" in (s.guard or "")
        ]
        if result
        else []
    )
    roles[Role.DECODE_RESULT] = tuple(sorted(set(decode)))
    spec = _one(project, "EAGLEWorkerV2.forward_batch_generation", "speculative.eagle_worker_v2")
    roles[Role.SPEC_FORWARD] = (spec,) if spec else ()
    # the decode step and the worker's own helpers it calls (0.5.23 moved prefill into one)
    helpers = (
        [spec] + sorted({s.callee for s in project.callees(spec) if s.callee.owner == spec.owner})
        if spec
        else []
    )
    for role, short in _SPEC_CALLEES.items():
        found = sorted({c for h in helpers for c in _callees(project, h, short) if c != spec})
        if role is Role.TARGET_FORWARD:
            found = [c for c in found if not c.module.startswith("sglang.srt.speculative")]
        roles[role] = tuple(found)
    roles[Role.DRAFT_FORWARD] = tuple(
        c for d in roles[Role.DRAFT] for c in _callees(project, d, "draft_forward")
    )
    roles[Role.DECISION] = (HOOK_DECISION,)
    return roles


def selection_from_source(project: Project, family: Family) -> StaticSelection:
    """The default selection for the release in ``project``."""
    located = locate_roles(project)
    table = builtin_names(family)
    names: dict[Role, tuple[QualName, ...]] = {}
    fallbacks: list[Role] = []
    for role in table:
        if located.get(role):
            names[role] = located[role]
        else:
            names[role] = tuple(table[role])
            fallbacks.append(role)
    return StaticSelection(default_selection(names), names, tuple(fallbacks))
