"""The scheduler and worker methods the plain off state (:mod:`.plainoff`) wraps, as the hook
calls them: the switch before prefill scheduling, the re-admission after a batch's results,
the capture once the target's graphs exist."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .hook import Hook


def _installed() -> Hook | None:
    from .hook import installed  # the hook imports this module

    return installed()


def switch_before(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    hook = _installed()
    if hook is not None:
        readmit(hook, self)
        hook.guarded("switch", hook.before_prefill, self, args, kwargs)


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
        hook.guarded("capture", hook.plain_ready, self)
