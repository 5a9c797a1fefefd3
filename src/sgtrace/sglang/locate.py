"""The one site locator: where the hook attaches and what the tracer records, by structure.

Nothing here depends on line numbers or on how a release spells its imports: sites are the
resolved calls the graph engine reports inside two functions of :mod:`~sgtrace.sglang.anchors`,
recognised by the callee's short name and by the ``if`` guard around them.

* decide: inside ``Scheduler.process_batch_result``, the call to ``process_batch_result_decode``
  under a guard with a positive ``is_decode()`` term. Its callee is the decode-result handler (a
  Scheduler mixin method, or a method of the ``batch_result_processor`` component).
* switch (upstream's): inside ``EAGLEWorkerV2.forward_batch_generation``, in the decode branch
  (a guard with a negated ``is_extend()`` term), the call to ``activate_step_by_batch``, where
  upstream switches its own runtime states; releases without it have no runtime states and the
  site is the decode branch's call to ``verify``. The hook itself switches elsewhere, in the
  scheduler (:mod:`sgtrace.sglang.plain_names`); this site tells the family.
* attach: ``EAGLEWorkerV2.__init__``.

The family (:class:`~sgtrace.sglang.family.Family`) is read from that site:
``ZERO_STEP_STATES`` when the decode branch also calls ``_build_trivial_verify_input``
(upstream's zero-step state), ``RUNTIME_STATES`` with ``activate_step_by_batch`` but not that,
``SCHEDULER_MIXINS`` without it.

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
    DECIDE_CALLEE,
    DECIDE_CALLER,
    DECIDE_GUARD,
    EXTEND_GUARD,
    OBSERVE_CALLEE,
    SWITCH_CALLEE,
    SWITCH_CALLER,
    WORKER_CLASS,
    WORKER_MODULE,
    ZERO_STEP_CALLEE,
    hook_relies_on,
)
from sgtrace.sglang.family import NEWEST_KNOWN, Family


@dataclass(frozen=True)
class Located:
    """The hook's decide and attach sites in one release, upstream's switch site, the family
    and why."""

    decide: CallSite
    switch: CallSite
    attach: Node
    family: Family
    family_reason: str

    @property
    def hook_relies_on(self) -> tuple[QualName, ...]:
        """Every function the hook patches or calls here (each checked to be defined)."""
        return hook_relies_on(self.decide.callee)


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
    """Upstream's switch site in the worker's decode branch, the family it shows, and why."""
    calls = _callees(project, SWITCH_CALLER, "decode-branch", label)
    decode = [c for c in calls if _negated(c.guard, EXTEND_GUARD)]
    activate = [c for c in decode if c.callee.short == SWITCH_CALLEE]
    if activate:
        if any(c.callee.short == ZERO_STEP_CALLEE for c in decode):
            reason = (
                f"{SWITCH_CALLEE} runs before launch in the decode branch; upstream's zero-step "
                f"state (a one-token verify, {ZERO_STEP_CALLEE}) is one of its runtime states"
            )
            return activate[0], Family.ZERO_STEP_STATES, reason
        reason = (
            f"the decode branch of {SWITCH_CALLER.qualname} never calls {ZERO_STEP_CALLEE}: "
            f"no zero-step state (added in {Family.ZERO_STEP_STATES.first_release})"
        )
        return activate[0], Family.RUNTIME_STATES, reason
    verify = [c for c in decode if c.callee.short == OBSERVE_CALLEE]
    if not verify:
        raise HookSiteNotFoundError(
            f"decode-branch site: no decode branch (a guard `not (... {EXTEND_GUARD} ...)`) "
            f"calling {SWITCH_CALLEE} or {OBSERVE_CALLEE} in {SWITCH_CALLER.qualname} of {label}; "
            f"found instead: {_listing(decode or calls[:8])}"
        )
    reason = (
        f"the decode branch of {SWITCH_CALLER.qualname} has no {SWITCH_CALLEE} call "
        f"(upstream runtime states: {Family.RUNTIME_STATES.first_release}+, zero-step state: "
        f"{Family.ZERO_STEP_STATES.first_release}+)"
    )
    return verify[0], Family.SCHEDULER_MIXINS, reason
