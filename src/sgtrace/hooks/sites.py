"""Locate the hook's sites in an SGLang release through the graph engine, by structure.

Nothing here depends on line numbers or on how a release spells its imports: the sites are the
resolved calls that the graph engine reports inside two functions, recognised by the callee's
short name and by the ``if`` guard around them.

* decide: inside ``Scheduler.process_batch_result``, the call whose callee is named
  ``process_batch_result_decode`` under a guard with a positive ``is_decode()`` term. The callee
  is the function the runtime hook wraps (a Scheduler mixin method up to 0.5.12, a method of the
  ``batch_result_processor`` component from 0.5.13).
* switch: inside ``EAGLEWorkerV2.forward_batch_generation``, in the decode branch (a guard with a
  negated ``is_extend()`` term), the call to ``activate_step_by_batch``; releases without it are
  observe-only and the site is the decode branch's call to ``verify``.
* attach: the end of ``EAGLEWorkerV2.__init__``.

The release can switch (:attr:`ReleaseFamily.ZERO_STEP_STATES`) when the decode branch also runs
``_build_trivial_verify_input``, ``init_cuda_graphs`` builds states through the
``adaptive_controller`` and every method of :data:`spec.STATE_METHODS` is defined.

>>> _positive("not (a.is_extend()) and b.is_decode()", "is_decode()")
True
>>> _negated("not (batch.forward_mode.is_extend() or batch.is_extend_in_batch)", "is_extend()")
True
"""

from __future__ import annotations

from collections.abc import Iterable

from sgtrace.errors import HookSiteNotFoundError
from sgtrace.graphs.build import Project
from sgtrace.graphs.model import CallSite
from sgtrace.graphs.source import SourceTree
from sgtrace.hooks.spec import (
    ATTACH_TARGET,
    DECIDE_CALLEE,
    DECIDE_CALLER,
    DECIDE_GUARD,
    STATE_METHODS,
    SWITCH_CALLEE,
    SWITCH_CALLER,
    UNSUPPORTED_REASON,
    WORKER_CLASS,
    WORKER_MODULE,
    HookSpec,
    ReleaseFamily,
    Site,
    SiteKind,
)
from sgtrace.names import QualName

EXTEND_GUARD = "is_extend()"


def locate_sites(tree: SourceTree, project: Project | None = None) -> HookSpec:
    """The :class:`HookSpec` of the release in ``tree``; raises :class:`HookSiteNotFoundError`.

    ``project`` may be passed to reuse a graph engine already built over ``tree``.
    """
    project = project if project is not None else Project(tree)
    label = tree.label
    decide = _locate_decide(project, label)
    switch, family, reason = _locate_switch(project, label)
    attach = _locate_attach(project, label)
    required = [decide.target, attach.target]
    if family is ReleaseFamily.ZERO_STEP_STATES:
        required += [_method(name) for name in STATE_METHODS] + [UNSUPPORTED_REASON]
    return HookSpec(label, decide, switch, attach, family, reason, tuple(sorted(set(required))))


def _method(name: str) -> QualName:
    return QualName(WORKER_MODULE, f"{WORKER_CLASS}.{name}")


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
            f"{site} site: no {caller.qualname} in {caller.module} of {label}; "
            "the hook knows SGLang 0.5.9 to 0.5.23, check the --source release"
        )
    return project.callees(caller)


def _listing(calls: Iterable[CallSite]) -> str:
    shown = [f"{c.text} (line {c.line}, guard {c.guard!r})" for c in calls]
    return "; ".join(shown) if shown else "nothing"


def _site(kind: SiteKind, call: CallSite) -> Site:
    return Site(kind, call.caller, call.callee, call.file, call.line, call.text, call.guard)


def _locate_decide(project: Project, label: str) -> Site:
    calls = _callees(project, DECIDE_CALLER, "decide", label)
    named = [c for c in calls if c.callee.short == DECIDE_CALLEE]
    found = [c for c in named if _positive(c.guard, DECIDE_GUARD)]
    if len(found) != 1:
        instead = named or [c for c in calls if c.callee.short.startswith("process_batch_result")]
        raise HookSiteNotFoundError(
            f"decide site: expected one call to {DECIDE_CALLEE} guarded by {DECIDE_GUARD} in "
            f"{DECIDE_CALLER.qualname} of {label}, found {len(found)}; found instead: "
            f"{_listing(instead)}"
        )
    return _site(SiteKind.DECIDE, found[0])


def _locate_switch(project: Project, label: str) -> tuple[Site, ReleaseFamily, str]:
    calls = _callees(project, SWITCH_CALLER, "switch", label)
    decode = [c for c in calls if _negated(c.guard, EXTEND_GUARD)]
    activate = [c for c in decode if c.callee.short == SWITCH_CALLEE]
    if activate:
        site = _site(SiteKind.SWITCH, activate[0])
        missing = _missing_zero_step(project, decode)
        if missing is None:
            reason = (
                "activate_step_by_batch runs before launch in the decode branch; the zero-step "
                "state (one-token verify + draft extend) is pre-built at start-up"
            )
            return site, ReleaseFamily.ZERO_STEP_STATES, reason
        return site, ReleaseFamily.OBSERVE_ONLY, missing
    verify = [c for c in decode if c.callee.short == "verify"]
    if not verify:
        raise HookSiteNotFoundError(
            f"switch site: no decode branch (a guard `not (... {EXTEND_GUARD} ...)`) calling "
            f"{SWITCH_CALLEE} or verify in {SWITCH_CALLER.qualname} of {label}; found instead: "
            f"{_listing(decode or calls[:8])}"
        )
    reason = (
        f"the decode branch of {SWITCH_CALLER.qualname} has no {SWITCH_CALLEE} call "
        "(upstream runtime states: 0.5.13+, zero-step state: 0.5.14+)"
    )
    return _site(SiteKind.SWITCH, verify[0]), ReleaseFamily.OBSERVE_ONLY, reason


def _missing_zero_step(project: Project, decode: list[CallSite]) -> str | None:
    """Why the release cannot run a zero-step state, or None when it can."""
    if not any(c.callee.short == "_build_trivial_verify_input" for c in decode):
        return (
            f"the decode branch of {SWITCH_CALLER.qualname} never calls "
            "_build_trivial_verify_input: no zero-step state (added in 0.5.14)"
        )
    undefined = [m for m in STATE_METHODS if project.node(_method(m)) is None]
    if undefined:
        return f"{WORKER_CLASS} does not define {', '.join(undefined)}"
    if project.node(UNSUPPORTED_REASON) is None:
        return f"no {UNSUPPORTED_REASON} to check the server arguments with"
    delegations = {
        "init_cuda_graphs": ("register", "init_states"),
        "activate_step_by_batch": ("activate_step_by_batch",),
    }
    for method, wanted in delegations.items():
        made = _called_names(project, _method(method))
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


def _locate_attach(project: Project, label: str) -> Site:
    node = project.node(ATTACH_TARGET)
    if node is None:
        raise HookSiteNotFoundError(
            f"attach site: {WORKER_CLASS} defines no __init__ in {WORKER_MODULE} of {label}"
        )
    return Site(
        SiteKind.ATTACH,
        ATTACH_TARGET,
        ATTACH_TARGET,
        node.file,
        node.line,
        "end of __init__",
        None,
    )
