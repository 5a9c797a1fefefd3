"""The decision carrier in one process: two carriers stand for two ranks sharing a broadcast."""

from __future__ import annotations

import dataclasses
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from tests.payload.payload_support import hook_config, names_before_the_receiver

from sgtrace.payload.carry import DecisionCarrier, DecisionMarker
from sgtrace.payload.config import Delivery, SiteRef
from sgtrace.payload.hook import Hook
from sgtrace.payload.patcher import ORIGINAL_ATTR, Patches
from sgtrace.payload.policy import PolicyConfig
from sgtrace.payload.record import DecisionRecord

NAMES = types.SimpleNamespace(
    receiver_class="Receiver", receive_requests="receive", broadcast_requests="broadcast"
)


def record(step: int, spec_on: bool, changed: bool) -> DecisionRecord:
    return DecisionRecord(step, 0, 8, spec_on, changed, "measured", 2.0, 0.005)


class Wire:
    """What the source broadcast last (pickled objects stay as they are here)."""

    def __init__(self) -> None:
        self.sent: list[object] | None = None


def rank_module(rank: int, wire: Wire, skip: list[bool], names: Any = NAMES) -> types.ModuleType:
    """A receiving module as SGLang's: its method calls the module global broadcast (the
    receiver's, or with the names of 0.5.9's scheduler, the scheduler's own)."""
    module = types.ModuleType(f"receiver{rank}")

    def broadcast(data, rank, dist_group=None, src=0):  # type: ignore[no-untyped-def]
        if rank == src:
            wire.sent = list(data)
            return data
        return list(wire.sent or [])

    def receive(self):  # type: ignore[no-untyped-def]
        if skip and skip[0]:  # upstream's receive skipper: no broadcast this iteration
            return []
        broadcast = vars(module)[names.broadcast_requests]  # looked up when called
        return broadcast(["request"] if rank == 0 else None, rank, None, src=0)

    setattr(module, names.broadcast_requests, broadcast)
    setattr(
        module,
        names.receiver_class,
        type(names.receiver_class, (), {names.receive_requests: receive}),
    )
    return module


def two_ranks(
    skip: list[bool], names: Any = NAMES
) -> tuple[list, list, DecisionCarrier, list[types.ModuleType], Patches]:  # type: ignore[type-arg]
    wire, patches = Wire(), Patches()
    delivered: list[list] = [[], []]  # type: ignore[type-arg]
    carriers, modules = [], []
    for rank in (0, 1):
        carrier = DecisionCarrier(
            lambda records, it, rank=rank: delivered[rank].append((records, it))
        )
        module = rank_module(rank, wire, skip, names)
        carrier.install(patches, names, module)
        carrier.engage(replicated=True)
        carriers.append(carrier)
        modules.append(module)
    return delivered[0], delivered[1], carriers[0], modules, patches


def receive(module: types.ModuleType, names: Any = NAMES) -> object:
    """The module's receiving method, called as the scheduler loop calls it."""
    return getattr(getattr(module, names.receiver_class)(), names.receive_requests)()


def iterate(modules: list[types.ModuleType], names: Any = NAMES) -> object:
    """One loop iteration on both ranks (the source first: it broadcasts); rank 1's list."""
    receive(modules[0], names)
    return receive(modules[1], names)


@pytest.fixture(params=["receiver", "scheduler"])
def names(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """The receiving module's names: the receiver component's (0.5.13 on; here short ones), or
    those the map reads from a scheduler shaped as 0.5.9's, which receives itself."""
    if request.param == "receiver":
        return NAMES
    found = names_before_the_receiver(tmp_path)
    assert (found.receiver_module, found.receiver_class, found.receive_requests) == (
        "sglang.srt.managers.scheduler",
        "Scheduler",
        "recv_requests",
    )
    return found


def test_a_toggle_rides_the_broadcast_and_is_applied_on_both_ranks_at_one_iteration(
    names: Any,
) -> None:
    skip = [False]
    on_source, on_receiver, source, modules, _ = two_ranks(skip, names)
    assert iterate(modules, names) == ["request"]  # the first iteration: nothing decided yet
    first, keep, toggle = record(0, True, False), record(1, True, False), record(2, False, True)
    source.post(first)
    assert iterate(modules, names) == ["request"]  # SGLang never sees the marker
    source.post(keep)
    iterate(modules, names)
    skip[0] = True  # an iteration without a broadcast: the toggle waits on every rank
    source.post(toggle)
    iterate(modules, names)
    skip[0] = False
    assert iterate(modules, names) == ["request"]
    assert on_source == [((first,), 2), ((keep,), 3), ((toggle,), 5)]
    assert on_receiver == [((first,), 2), ((toggle,), 5)]  # the first decision and toggles


def test_a_decision_that_keeps_the_state_sends_nothing_more() -> None:
    on_source, _, source, modules, _ = two_ranks([False])
    source.post(record(0, True, False))
    iterate(modules)
    source.post(record(1, True, False))
    modules[0].Receiver().receive()
    assert not any(isinstance(item, DecisionMarker) for item in modules[1].broadcast(None, 1))


def test_uninstall_puts_the_receiver_and_the_broadcast_back() -> None:
    wire = Wire()
    module = rank_module(0, wire, [])
    before = (module.broadcast, module.Receiver.receive)
    patches = Patches()
    carrier = DecisionCarrier(lambda records, iteration: None)
    carrier.install(patches, NAMES, module)
    assert carrier.is_patched and module.broadcast is not before[0]
    patches.undo()
    assert (module.broadcast, module.Receiver.receive) == before


def test_on_a_scheduler_shaped_as_0_5_9s_the_carrier_and_the_decide_site_share_the_module(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """0.5.9-0.5.12: the scheduler's module holds the receiving method and other sites of the
    hook (the plain off state's; here a decide site stands for them). The hook (runtime mode)
    wraps each there and swaps the broadcast, the carrier delivers at the scheduler's receive,
    and close puts everything back."""
    names = names_before_the_receiver(tmp_path)
    module = rank_module(0, Wire(), [], names)
    module.__name__ = names.receiver_module
    scheduler = getattr(module, names.receiver_class)
    scheduler.process_batch_result = lambda self, batch, result: None  # the decide site
    methods = (names.receive_requests, "process_batch_result")
    before = [vars(scheduler)[name] for name in methods], vars(module)[names.broadcast_requests]
    monkeypatch.setitem(sys.modules, names.receiver_module, module)
    config = dataclasses.replace(
        hook_config(PolicyConfig(), Delivery.RUNTIME, names=names),
        decide=SiteRef(names.receiver_module, "Scheduler.process_batch_result"),
    )
    hook = Hook(config)
    hook.patch_on_import()  # the module is imported already: wrapped at once
    try:
        assert all(hasattr(vars(scheduler)[name], ORIGINAL_ATTR) for name in methods)
        assert hook.carrier.is_patched
        hook.carrier.engage(replicated=True)  # what attach does at TP size 2 (rank 0 here)
        hook.carrier.post(record(0, False, True))
        assert hook.decisions.entries == ()  # applied at the next receive, not when decided
        assert receive(module, names) == ["request"]
        assert [(r.step, r.spec_on, r.iteration) for r in hook.decisions.entries] == [(0, False, 1)]
    finally:
        hook.close()
    assert ([vars(scheduler)[name] for name in methods], module.broadcast_pyobj) == before


def test_a_decision_on_arrivals_rides_the_broadcast_that_brings_them() -> None:
    """The deciding rank is shown what it received before it broadcasts it, once an
    iteration; a decision posted then is applied on both ranks in that same iteration."""
    wire, patches, seen = Wire(), Patches(), []
    delivered: list[list] = [[], []]  # type: ignore[type-arg]
    carriers, modules = [], []
    toggle = record(5, False, True)

    def arrive(received: object) -> None:
        seen.append(received)
        carriers[0].post(toggle)

    for rank in (0, 1):
        carrier = DecisionCarrier(
            lambda records, it, rank=rank: delivered[rank].append((records, it)),
            arrive if rank == 0 else None,
        )
        module = rank_module(rank, wire, [], NAMES)
        carrier.install(patches, NAMES, module)
        carrier.engage(replicated=True)
        carriers.append(carrier)
        modules.append(module)
    assert iterate(modules) == ["request"]
    assert seen == [["request"]]  # on the source, before the broadcast; once
    assert delivered == [[((toggle,), 1)], [((toggle,), 1)]]  # in the iteration it came


def test_at_tp_size_one_arrivals_are_shown_after_the_receive() -> None:
    seen: list[object] = []
    delivered: list[object] = []
    carrier = DecisionCarrier(lambda records, it: delivered.append((records, it)), seen.append)
    module = rank_module(0, Wire(), [True])  # no broadcast: as SGLang at TP size 1
    carrier.install(Patches(), NAMES, module)
    carrier.engage(replicated=False)
    receive(module)
    assert seen == [[]]
