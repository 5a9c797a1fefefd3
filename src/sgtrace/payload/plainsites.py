"""The scheduler and worker methods the plain off state (:mod:`.plainoff`) wraps, as the hook
calls them: the switch before prefill scheduling, the re-admission after a batch's results,
the capture once the target's graphs exist."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .config import PlainOffNames
from .eligibility import worker_refusal
from .plainoff import PlainOffSwitch

if TYPE_CHECKING:
    from .hook import Hook


LOGGER = logging.getLogger("sgtrace_hook")  # the hook's logger


def attach(hook: Hook, worker: Any, names: PlainOffNames) -> PlainOffSwitch | None:
    """Off is the plain decode path (:mod:`.plainoff`) on ``worker``; None where the hook may
    only observe (logged)."""
    reason = worker_refusal(hook.config, worker)
    if reason is not None:
        hook.warn_once("observe", "sgtrace-hook rank=%d: observe only: %s", hook.rank, reason)
        return None
    switch = PlainOffSwitch(worker, names, LOGGER)
    LOGGER.info(
        "sgtrace-hook attached rank=%d worker=%s (off = plain decode, switching by "
        "re-admitting the running requests)",
        hook.rank,
        type(worker).__name__,
    )
    return switch


def _installed() -> Hook | None:
    from .hook import installed  # the hook imports this module

    return installed()


def switch_before(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    hook = _installed()
    if hook is not None:
        readmit(hook, self)
        plain = hook.plain
        if plain is not None:
            hook.guarded("switch", plain.before_prefill, self, args, kwargs)


def result_after(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    hook = _installed()
    if hook is not None:
        readmit(hook, self)


def readmit(hook: Hook, scheduler: Any) -> None:
    """Give retracted requests back to the scheduler, even after the hook stopped deciding:
    a request is never left out of SGLang's queues."""
    if hook.plain is not None and hook.plain.held:
        try:
            hook.plain.readmit(scheduler)
        except Exception as exc:  # never take the server down; see Hook.fail
            hook.fail("readmit", exc)


def ready_after(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    hook = _installed()
    if hook is not None:
        plain = hook.plain
        if plain is not None and self is plain.worker:
            hook.guarded("capture", plain.capture)
