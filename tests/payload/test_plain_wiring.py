"""The hook wires the plain off state into SGLang's methods (runtime mode): the worker's
``__init__`` attaches it, the future map's constructor is recorded, the first prefill scheduling
captures the plain state, a decision flips the wanted mode, the next prefill scheduling
switches, the next result processing re-admits; ``close`` undoes it.
The stand-ins of tests/payload/plain_fakes.py play SGLang."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest
from tests.payload import plain_fakes
from tests.payload.payload_support import NAMES, hook_config
from tests.payload.plain_fakes import RELEASED, AbortReq, Algorithm, Batch, Req, Scheduler, Worker

from sgtrace.payload import registry
from sgtrace.payload.config import Delivery
from sgtrace.payload.hook import Hook
from sgtrace.payload.policy import PolicyConfig

POLICY = PolicyConfig(toggle_every_steps=1)  # off at the first result, on at the next


def receiver_module() -> types.ModuleType:
    """SGLang's request receiver with the broadcast it calls at TP size over 1 (carry.py)."""
    module = types.ModuleType(NAMES.receiver_module)
    receive = {NAMES.receive_requests: lambda self: []}
    setattr(module, NAMES.receiver_class, type(NAMES.receiver_class, (), receive))
    setattr(module, NAMES.broadcast_requests, lambda data, *args, **kwargs: data)
    return module


def next_iteration() -> None:
    """The scheduler loop's first call: receive requests (where carried decisions arrive)."""
    receiver = getattr(sys.modules[NAMES.receiver_module], NAMES.receiver_class)()
    getattr(receiver, NAMES.receive_requests)()


@pytest.fixture
def wired(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hook]:
    """A hook delivered at runtime: the stand-ins' module is imported, so it is wrapped at once."""
    yield from install(monkeypatch)


def install(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hook]:
    monkeypatch.setitem(sys.modules, NAMES.receiver_module, receiver_module())
    hook = Hook(hook_config(POLICY, Delivery.RUNTIME))
    hook.patch_on_import()
    registry.register(registry.PluginKind.HOOK, hook)
    plain_fakes.reset()
    try:
        yield hook
    finally:
        registry.uninstall(registry.PluginKind.HOOK)


def test_a_site_the_code_lacks_stops_the_hook_before_anything_switches(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A hook generated for another release: the result processing (where the retracted
    requests are re-admitted) has another name, so no switch may run at all."""
    monkeypatch.delattr(Scheduler, "process_batch_result")
    for hook in install(monkeypatch):
        scheduler = Scheduler(Worker())
        scheduler.get_new_batch_prefill(Batch([]))
        assert hook.failed and hook.plain is not None and not hook.plain.ready  # no capture
        running = Batch([Req("a")])
        scheduler.decode_result(running, types.SimpleNamespace(accept_lens=[2]))
        next_iteration()
        scheduler.get_new_batch_prefill(running)
        assert (scheduler.spec_algorithm, RELEASED) == (Algorithm.EAGLE3, [])  # nothing retracted
        assert running.reqs and hook.plain.switches == 0
    assert "Scheduler.process_batch_result wrapped" in caplog.text


def wrapped(cls: type, method: str) -> bool:
    return hasattr(vars(cls)[method], "__wrapped__")


def test_the_plain_off_state_runs_through_the_wrapped_methods(wired: Hook) -> None:
    worker = Worker()
    assert wired.plain is not None and not wired.plain.ready  # attached by __init__
    assert wired.carrier.is_relayed  # decisions travel through the receiver, as on every rank
    scheduler = Scheduler(worker)
    running = Batch([Req("a"), Req("b")])
    scheduler.get_new_batch_prefill(Batch([]))  # the scheduler's first iteration
    assert wired.plain.ready  # captured there, with the future map as SGLang built it
    assert wired.plain.future_maps[False].spec_algo is Algorithm.NONE
    scheduler.decode_result(running, types.SimpleNamespace(accept_lens=[2, 3]))
    assert wired.plain.want_spec_on  # posted, applied when the next iteration receives
    next_iteration()
    assert (wired.plain.want_spec_on, wired.plain.spec_on) == (False, True)
    assert scheduler.get_new_batch_prefill(running) == "prefill planned"
    assert (scheduler.spec_algorithm, scheduler.model_worker) == (
        Algorithm.NONE,
        scheduler.tp_worker,
    )
    assert RELEASED == [("a", True), ("b", True)] and scheduler.waiting_queue == []
    # outputs keep the launched server's shape (its tokenizer manager expects spec metrics)
    assert scheduler.stream_output() is Algorithm.EAGLE3
    assert scheduler.spec_algorithm is Algorithm.NONE
    scheduler.process_batch_result(None, None)  # the batch in flight at the switch
    assert [r.rid for r in scheduler.waiting_queue] == ["a", "b"] and scheduler.processed == 1
    assert wrapped(Scheduler, "get_new_batch_prefill")
    wired.close()
    for cls, method in ((Scheduler, "get_new_batch_prefill"), (plain_fakes.FutureMap, "__init__")):
        assert not wrapped(cls, method)


def test_a_hook_that_failed_still_readmits_what_it_retracted(wired: Hook) -> None:
    worker = Worker()
    scheduler = Scheduler(worker)
    scheduler.get_new_batch_prefill(Batch([]))
    running = Batch([Req("a")])
    scheduler.decode_result(running, types.SimpleNamespace(accept_lens=[2]))
    next_iteration()
    scheduler.get_new_batch_prefill(running)
    wired.fail("test", RuntimeError("a fault after the switch"))
    scheduler.process_batch_result(None, None)
    assert [r.rid for r in scheduler.waiting_queue] == ["a"]  # never left out of the queues


def test_in_patch_mode_the_plain_sites_are_wrapped_at_attach(wired: Hook) -> None:
    """Patch mode: SGLang's patched source calls attach at the end of the worker's __init__,
    before the scheduler builds its future map; the plain sites are wrapped then."""
    wired.close()
    hook = Hook(hook_config(POLICY, Delivery.PATCH))
    assert not wrapped(Scheduler, "get_new_batch_prefill")
    worker = Worker()
    hook.attach(worker)  # what the patched __init__ calls
    try:
        assert hook.plain is not None and wrapped(Scheduler, "get_new_batch_prefill")
        registry.uninstall(registry.PluginKind.HOOK)
        registry.register(registry.PluginKind.HOOK, hook)
        scheduler = Scheduler(worker)
        scheduler.get_new_batch_prefill(Batch([]))
        assert hook.plain.ready and hook.plain.future_maps[False].spec_algo is Algorithm.NONE
    finally:
        hook.close()
    assert not wrapped(Scheduler, "get_new_batch_prefill")


def switched_off(hook: Hook, held: list[str], queued: list[str]) -> Scheduler:
    """A scheduler whose running requests ``held`` were retracted at a switch to off and wait
    for the result processing to be re-admitted; ``queued`` arrived meanwhile."""
    scheduler = Scheduler(Worker())
    scheduler.get_new_batch_prefill(Batch([]))  # the capture
    running = Batch([Req(rid) for rid in held])
    scheduler.decode_result(running, types.SimpleNamespace(accept_lens=[2] * len(held)))
    next_iteration()
    scheduler.get_new_batch_prefill(running)
    scheduler.waiting_queue.extend(Req(rid) for rid in queued)
    assert hook.plain is not None and [r.rid for r in hook.plain.held] == held
    assert [r.rid for r in scheduler.waiting_queue] == queued and running.reqs == []
    return scheduler


@pytest.mark.parametrize(
    ("abort", "answered", "readmitted"),
    [
        (AbortReq("b"), ["b"], ["d", "a", "c"]),  # a held request, by its id
        (AbortReq("d"), ["d"], ["a", "b", "c"]),  # a queued one: the held are left alone
        (AbortReq(abort_all=True), ["c", "b", "a", "d"], []),  # SGLang pops from the end
    ],
)
def test_an_abort_while_requests_are_held_reaches_them(
    wired: Hook, abort: AbortReq, answered: list[str], readmitted: list[str]
) -> None:
    """Between a switch and the re-admission the retracted requests are in neither the waiting
    queue nor the running batch; SGLang's abort handler is shown them in its waiting queue,
    matches and answers them itself, and the others are re-admitted as before."""
    scheduler = switched_off(wired, ["a", "b", "c"], ["d"])
    scheduler.abort_request(abort)
    assert scheduler.answered == answered
    assert [r.rid for r in scheduler.waiting_queue] == [r for r in ["d"] if r not in answered]
    scheduler.process_batch_result(None, None)  # the batch in flight at the switch
    assert [r.rid for r in scheduler.waiting_queue] == readmitted
    assert not wired.failed and wired.plain is not None and wired.plain.held == []


def test_a_failing_abort_site_still_runs_the_abort_once_and_readmits(
    wired: Hook, monkeypatch: pytest.MonkeyPatch
) -> None:
    scheduler = switched_off(wired, ["a"], ["d"])
    assert wired.plain is not None

    def broken(scheduler: Scheduler) -> list[Req]:
        raise RuntimeError("no waiting queue")

    monkeypatch.setattr(wired.plain, "show_held", broken)
    scheduler.abort_request(AbortReq(abort_all=True))
    assert wired.failed and scheduler.answered == ["d"]  # SGLang's abort ran, once
    scheduler.process_batch_result(None, None)
    assert [r.rid for r in scheduler.waiting_queue] == ["a"]  # never left out of the queues
