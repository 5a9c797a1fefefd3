"""The one site locator: where the hook attaches and what the tracer records, by structure.

Nothing here depends on line numbers or on how a release spells its imports: sites are the
resolved calls the graph engine reports inside two functions of :mod:`~sgtrace.sglang.anchors`,
recognised by the callee's short name and by the ``if`` guard around them.

* decide: inside ``Scheduler.process_batch_result``, the call to ``process_batch_result_decode``
  under a guard with a positive ``is_decode()`` term. Its callee is the decode-result handler (a
  Scheduler mixin method, or a method of the ``batch_result_processor`` component).
* switch: inside ``EAGLEWorkerV2.forward_batch_generation``, in the decode branch (a guard with
  a negated ``is_extend()`` term), the call to ``activate_step_by_batch``; releases without it
  have no runtime states and the site is the decode branch's call to ``verify``.
* attach: ``EAGLEWorkerV2.__init__``.

The family (:class:`~sgtrace.sglang.family.Family`) is read from the switch site:
``ZERO_STEP_STATES`` when the decode branch also calls ``_build_trivial_verify_input``, every
method of :data:`~sgtrace.sglang.anchors.STATE_METHODS` is defined and they drive the
``adaptive_controller`` as the hook's controller expects; ``RUNTIME_STATES`` with
``activate_step_by_batch`` but not all of that; ``SCHEDULER_MIXINS`` without it.

>>> _positive("not (a.is_extend()) and b.is_decode()", "is_decode()")
True
>>> _negated("not (batch.forward_mode.is_extend() or batch.is_extend_in_batch)", "is_extend()")
True
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sgtrace.errors import HookSiteNotFoundError
from sgtrace.graphs.build import Project
from sgtrace.graphs.model import CallSite, Node
from sgtrace.names import QualName
from sgtrace.sglang.anchors import (
    ATTACH_TARGET,
    CONTROLLER_CALLS,
    DECIDE_CALLEE,
    DECIDE_CALLER,
    DECIDE_GUARD,
    EXTEND_GUARD,
    OBSERVE_CALLEE,
    STATE_METHODS,
    SWITCH_CALLEE,
    SWITCH_CALLER,
    UNSUPPORTED_REASON,
    WORKER_CLASS,
    WORKER_MODULE,
    ZERO_STEP_CALLEE,
    hook_relies_on,
    worker_method,
)
from sgtrace.sglang.family import NEWEST_KNOWN, Family


@dataclass(frozen=True)
class Located:
    """The hook's three sites in one release, its family and why."""

    decide: CallSite
    switch: CallSite
    attach: Node
    family: Family
    family_reason: str

    @property
    def hook_relies_on(self) -> tuple[QualName, ...]:
        """Every function the hook patches or calls here (each checked to be defined)."""
        return hook_relies_on(self.family, self.decide.callee)


def locate(project: Project, label: str) -> Located:
    """The sites of the release in ``project``; raises :class:`HookSiteNotFoundError`.

    ``label`` names the release in messages (``sglang==0.5.16``).
    """
    decide = locate_decide(project, label)
    switch, family, reason = locate_switch(project, label)
    attach = project.node(ATTACH_TARGET)
    if attach is None:
        raise HookSiteNotFoundError(
            f"attach site: {WORKER_CLASS} defines no __init__ in {WORKER_MODULE} of {label}"
        )
    return Located(decide, switch, attach, family, reason)


def _conjuncts(guard: str | None) -> list[str]:
    return [part.strip() for part in (guard or "").split(" and ") if part.strip()]


def _positive(guard: str | None, term: str) -> bool:
    """True when a conjunct of ``guard`` mentions ``term`` and is not negated."""
    return any(term in c and not c.startswith("not (") for c in _conjuncts(guard))


def _negated(guard: str | None, term: str) -> bool:
    """True when a negated conjunct of ``guard`` mentions ``term``."""
    return any(term in c and c.startswith("not (") for c in _conjuncts(guard))


def _callees(project: Project, caller: QualName, site: str, label: str) -> tuple[CallSite, ...]:
    if project.node(caller) is None:
        raise HookSiteNotFoundError(
            f"{site} site: no {caller.qualname} in {caller.module} of {label}; sgtrace knows "
            f"SGLang {Family.SCHEDULER_MIXINS.first_release} to {NEWEST_KNOWN}, check the "
            "--source release"
        )
    return project.callees(caller)


def _listing(calls: Iterable[CallSite]) -> str:
    shown = [f"{c.text} (line {c.line}, guard {c.guard!r})" for c in calls]
    return "; ".join(shown) if shown else "nothing"


def locate_decide(project: Project, label: str) -> CallSite:
    """The decode-result call of ``Scheduler.process_batch_result``."""
    calls = _callees(project, DECIDE_CALLER, "decide", label)
    named = [c for c in calls if c.callee.short == DECIDE_CALLEE]
    found = [c for c in named if _positive(c.guard, DECIDE_GUARD)]
    if len(found) != 1:
        instead = named or [c for c in calls if c.callee.short.startswith("process_batch_result")]
        raise HookSiteNotFoundError(
            f"decide site: expected one call to {DECIDE_CALLEE} guarded by {DECIDE_GUARD} "
            f"in {DECIDE_CALLER.qualname} of {label}, found {len(found)}; found instead: "
            f"{_listing(instead)}"
        )
    return found[0]


def locate_switch(project: Project, label: str) -> tuple[CallSite, Family, str]:
    """The switch site in the worker's decode branch, the family it shows, and why."""
    calls = _callees(project, SWITCH_CALLER, "switch", label)
    decode = [c for c in calls if _negated(c.guard, EXTEND_GUARD)]
    activate = [c for c in decode if c.callee.short == SWITCH_CALLEE]
    if activate:
        missing = _missing_zero_step(project, decode)
        if missing is None:
            reason = (
                f"{SWITCH_CALLEE} runs before launch in the decode branch; the zero-step "
                "state (one-token verify + draft extend) is pre-built at start-up"
            )
            return activate[0], Family.ZERO_STEP_STATES, reason
        return activate[0], Family.RUNTIME_STATES, missing
    verify = [c for c in decode if c.callee.short == OBSERVE_CALLEE]
    if not verify:
        raise HookSiteNotFoundError(
            f"switch site: no decode branch (a guard `not (... {EXTEND_GUARD} ...)`) calling "
            f"{SWITCH_CALLEE} or {OBSERVE_CALLEE} in {SWITCH_CALLER.qualname} of {label}; "
            f"found instead: {_listing(decode or calls[:8])}"
        )
    reason = (
        f"the decode branch of {SWITCH_CALLER.qualname} has no {SWITCH_CALLEE} call "
        f"(upstream runtime states: {Family.RUNTIME_STATES.first_release}+, zero-step state: "
        f"{Family.ZERO_STEP_STATES.first_release}+)"
    )
    return verify[0], Family.SCHEDULER_MIXINS, reason


def _missing_zero_step(project: Project, decode: list[CallSite]) -> str | None:
    """Why the release cannot run a zero-step state, or None when it can."""
    if not any(c.callee.short == ZERO_STEP_CALLEE for c in decode):
        return (
            f"the decode branch of {SWITCH_CALLER.qualname} never calls {ZERO_STEP_CALLEE}: "
            f"no zero-step state (added in {Family.ZERO_STEP_STATES.first_release})"
        )
    undefined = [m for m in STATE_METHODS if project.node(worker_method(m)) is None]
    if undefined:
        return f"{WORKER_CLASS} does not define {', '.join(undefined)}"
    if project.node(UNSUPPORTED_REASON) is None:
        return f"no {UNSUPPORTED_REASON} to check the server arguments with"
    for method, wanted in CONTROLLER_CALLS.items():
        made = _called_names(project, worker_method(method))
        absent = [w for w in wanted if w not in made]
        if absent:
            return (
                f"{WORKER_CLASS}.{method} does not call adaptive_controller."
                f"{', '.join(absent)}: the controller protocol changed"
            )
    return None


def _called_names(project: Project, caller: QualName) -> set[str]:
    """Short names of everything ``caller`` calls, resolved or not (``a.b.c(...)`` -> ``c``)."""
    resolution = project.resolution(caller)
    names = {c.callee.short for c in resolution.sites}
    return names | {u.spelled.rsplit(".", 1)[-1] for u in resolution.unresolved}
