"""The scheduler and worker methods the plain off state (:mod:`.plainoff`) wraps, as the hook
calls them: the switch before prefill scheduling (the capture at its first call), the
re-admission after a batch's results, the abort handler (shown the held requests), and the
future map's constructor, whose arguments the plain future map is built with again."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .config import PlainOffNames
from .eligibility import worker_refusal
from .patcher import before, then
from .plainoff import BUILT_WITH, PlainOffSwitch

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
    switch = PlainOffSwitch(worker, names, LOGGER, hook.config.options.catch_up)
    LOGGER.info(
        "sgtrace-hook attached rank=%d worker=%s (off = plain decode, switching by "
        "re-admitting the running requests)",
        hook.rank,
        type(worker).__name__,
    )
    return switch


def watch(hook: Hook) -> None:
    """Wrap the scheduler's prefill scheduling (the switch), result processing (re-admission)
    and abort handler (held requests shown), and record how the future map is built (the plain
    one is built alike) as their modules are imported, or at once where they are (patch mode:
    at attach, before the scheduler builds its future map and binds its request handlers)."""
    plain = hook.config.plain_names
    sites = (
        (plain.switch_module, plain.switch_qualname, before(switch_before)),
        (plain.switch_module, plain.result_qualname, then(result_after)),
        (plain.switch_module, plain.abort_qualname, held_shown),
        (plain.future_map_module, f"{plain.future_map_class}.__init__", before(future_map_built)),
        (plain.output_module, plain.output_qualname, launched_view),
    )
    for module, qualname, wrapper in sites:
        hook.patcher.watch(module, functools.partial(hook.wrap_site, qualname, wrapper))


def _installed() -> Hook | None:
    from .hook import installed  # the hook imports this module

    return installed()


def switch_before(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    hook = _installed()
    if hook is not None:
        readmit(hook, self)
        plain = hook.plain
        if plain is not None:
            if not plain.ready:  # before the capture: never switch with a site unwrapped
                hook.guarded("switch", require_sites, hook, plain.names)
            hook.guarded("switch", plain.before_prefill, self, args, kwargs)


def require_sites(hook: Hook, names: PlainOffNames) -> None:
    """Every method the switch relies on was wrapped (their modules are imported by the
    scheduler's first prefill scheduling), or the hook stops before anything is switched: a
    hook generated for another release must not retract requests it cannot re-admit."""
    needed = (
        names.result_qualname,
        names.abort_qualname,
        f"{names.future_map_class}.__init__",
        names.output_qualname,
    )
    missing = [qualname for qualname in needed if qualname not in hook.wrapped_sites]
    if missing:
        raise RuntimeError(
            f"the plain off state needs {', '.join(missing)} wrapped, and SGLang's code has no "
            "such method (a hook generated for another release?): regenerate it with "
            "sgtrace inject-hook for the installed SGLang"
        )


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


def held_shown(original: Callable[..., Any]) -> Callable[..., Any]:
    """The scheduler's abort handler: while requests are held (retracted at a switch, not yet
    re-admitted) it runs with them at the end of its waiting queue, and those it did not abort
    stay held (:meth:`.PlainOffSwitch.show_held`). SGLang's own code matches and answers; the
    handler runs exactly once, whatever the hook's part raises (then :meth:`Hook.fail`)."""

    @functools.wraps(original)
    def abort(self: Any, *args: Any, **kwargs: Any) -> Any:
        hook = _installed()
        plain = hook.plain if hook is not None else None
        if hook is None or plain is None or not plain.held:
            return original(self, *args, **kwargs)
        shown: list[Any] | None = None
        try:
            shown = plain.show_held(self)
        except Exception as exc:  # never take the server down; see Hook.fail
            hook.fail("abort", exc)
        try:
            return original(self, *args, **kwargs)
        finally:
            if shown is not None:
                try:
                    plain.hide_held(self, shown)
                except Exception as exc:  # never take the server down; see Hook.fail
                    hook.fail("abort", exc)

    return abort


def launched_view(original: Callable[..., Any]) -> Callable[..., Any]:
    """The output streaming method: while off, the object it runs on (the scheduler itself
    until 0.5.12) is shown the launched algorithm, as the tokenizer manager, started for a
    speculative server, expects its metrics fields in every output."""

    @functools.wraps(original)
    def stream(self: Any, *args: Any, **kwargs: Any) -> Any:
        hook = _installed()
        plain = hook.plain if hook is not None else None
        if plain is None or not plain.ready:  # nothing was switched yet
            return original(self, *args, **kwargs)
        slot = plain.names.scheduler_algorithm
        if getattr(self, slot, None) is not plain.none_algorithm:  # on, or its own algorithm
            return original(self, *args, **kwargs)
        setattr(self, slot, plain.launched_algorithm)
        try:
            return original(self, *args, **kwargs)
        finally:
            setattr(self, slot, plain.none_algorithm)

    return stream


def future_map_built(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Before the future map's constructor: record its arguments (PlainOffSwitch.capture builds
    the plain one from them)."""
    vars(self)[BUILT_WITH] = (args, dict(kwargs))
