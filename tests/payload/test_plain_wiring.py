"""The hook wires the plain off state into SGLang's methods (runtime mode): the worker's
``__init__`` attaches it, the future map's constructor is recorded, the first prefill scheduling
captures the plain state, a decision flips the wanted mode, the next prefill scheduling
switches, the next result processing re-admits; ``close`` undoes it.
Stand-in modules play SGLang (tests/payload/test_plainoff.py has the objects)."""

from __future__ import annotations

import dataclasses
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest
import test_plainoff as plainoff_fakes
from payload_support import NAMES
from test_plainoff import RELEASED, Algorithm, Batch, Req

from sgtrace.payload import registry
from sgtrace.payload.config import Delivery, HookConfig, HookOptions, OffState, SiteRef
from sgtrace.payload.hook import Hook
from sgtrace.payload.policy import PolicyConfig
from sgtrace.sglang.family import Family
from sgtrace.sglang.plain_names import plain_off_names

SCHED, WORKER, COMMON = "fake_plain_scheduler", "fake_plain_worker", "test_plainoff"


class Worker(plainoff_fakes.Worker):
    pass


class Scheduler(plainoff_fakes.Scheduler):
    processed = 0

    def get_new_batch_prefill(self, running_batch: Batch) -> str:
        return "prefill planned"

    def process_batch_result(self, batch: Any, result: Any) -> None:
        self.processed += 1

    def stream_output(self) -> Any:
        """Streams outputs; until 0.5.12 it reads the scheduler's own algorithm."""
        return self.spec_algorithm

    def decode_result(self, batch: Any, result: Any) -> None:
        """The decide site: SGLang hands a decode result over here."""


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


def plain_config(delivery: Delivery) -> HookConfig:
    names = dataclasses.replace(
        plain_off_names(Family.ZERO_STEP_STATES),
        switch_module=SCHED,
        switch_qualname="Scheduler.get_new_batch_prefill",
        result_qualname="Scheduler.process_batch_result",
        release_module=COMMON,
        future_map_module=COMMON,
        output_module=SCHED,
        output_qualname="Scheduler.stream_output",
    )
    return HookConfig(
        source="toy",
        can_switch=True,
        family_reason="toy",
        decide=SiteRef(SCHED, "Scheduler.decode_result"),
        attach=SiteRef(WORKER, "Worker.__init__"),
        unsupported_reason=None,
        scheduler_module=SCHED,
        delivery=delivery,
        policy=PolicyConfig(toggle_every_steps=1),  # off at the first result, on at the next
        options=HookOptions(off_state=OffState.PLAIN),
        names=NAMES,
        plain_names=names,
    )


@pytest.fixture
def wired(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hook]:
    for name, cls in ((SCHED, Scheduler), (WORKER, Worker)):
        module = types.ModuleType(name)
        setattr(module, cls.__name__, cls)
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setitem(sys.modules, NAMES.receiver_module, receiver_module())
    config = plain_config(Delivery.RUNTIME)
    hook = Hook(config)
    hook.patch_on_import()
    registry.register(registry.PluginKind.HOOK, hook)
    RELEASED.clear()
    try:
        yield hook
    finally:
        registry.uninstall(registry.PluginKind.HOOK)


def test_the_plain_off_state_runs_through_the_wrapped_methods(wired: Hook) -> None:
    worker = sys.modules[WORKER].Worker()
    assert wired.plain is not None and not wired.plain.ready  # attached by __init__
    assert wired.carrier.is_relayed  # decisions travel through the receiver, as on every rank
    scheduler = sys.modules[SCHED].Scheduler(worker)
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
    assert hasattr(vars(Scheduler)["get_new_batch_prefill"], "__wrapped__")
    wired.close()
    future_map = plainoff_fakes.FutureMap
    for cls, method in ((Scheduler, "get_new_batch_prefill"), (future_map, "__init__")):
        assert getattr(cls, method) is vars(cls)[method] and not hasattr(
            vars(cls)[method], "__wrapped__"
        )


def test_a_hook_that_failed_still_readmits_what_it_retracted(wired: Hook) -> None:
    worker = sys.modules[WORKER].Worker()
    scheduler = sys.modules[SCHED].Scheduler(worker)
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
    hook = Hook(plain_config(Delivery.PATCH))
    assert not hasattr(vars(Scheduler)["get_new_batch_prefill"], "__wrapped__")
    worker = plainoff_fakes.Worker()
    hook.attach(worker)  # what the patched __init__ calls
    try:
        assert hook.plain is not None and hasattr(
            vars(Scheduler)["get_new_batch_prefill"], "__wrapped__"
        )
        registry.uninstall(registry.PluginKind.HOOK)
        registry.register(registry.PluginKind.HOOK, hook)
        scheduler = Scheduler(worker)
        scheduler.get_new_batch_prefill(Batch([]))
        assert hook.plain.ready and hook.plain.future_maps[False].spec_algo is Algorithm.NONE
    finally:
        hook.close()
    assert not hasattr(vars(Scheduler)["get_new_batch_prefill"], "__wrapped__")
