"""The decision carrier in one process: two carriers stand for two ranks sharing a broadcast."""

from __future__ import annotations

import types

from sgtrace.payload.carry import DecisionCarrier, DecisionMarker
from sgtrace.payload.patcher import Patches
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


def rank_module(rank: int, wire: Wire, skip: list[bool]) -> types.ModuleType:
    """A receiving module as SGLang's: its method calls the module global broadcast."""
    module = types.ModuleType(f"receiver{rank}")

    def broadcast(data, rank, dist_group=None, src=0):  # type: ignore[no-untyped-def]
        if rank == src:
            wire.sent = list(data)
            return data
        return list(wire.sent or [])

    class Receiver:
        def receive(self):  # type: ignore[no-untyped-def]
            if skip and skip[0]:  # upstream's receive skipper: no broadcast this iteration
                return []
            return module.broadcast(["request"] if rank == 0 else None, rank, None, src=0)

    module.broadcast, module.Receiver = broadcast, Receiver  # type: ignore[attr-defined]
    return module


def two_ranks(
    skip: list[bool],
) -> tuple[list, list, DecisionCarrier, list[types.ModuleType], Patches]:  # type: ignore[type-arg]
    wire, patches = Wire(), Patches()
    delivered: list[list] = [[], []]  # type: ignore[type-arg]
    carriers, modules = [], []
    for rank in (0, 1):
        carrier = DecisionCarrier(
            lambda records, it, rank=rank: delivered[rank].append((records, it))
        )
        module = rank_module(rank, wire, skip)
        carrier.install(patches, NAMES, module)  # type: ignore[arg-type]
        carrier.engage(replicated=True)
        carriers.append(carrier)
        modules.append(module)
    return delivered[0], delivered[1], carriers[0], modules, patches


def iterate(modules: list[types.ModuleType]) -> list[object]:
    """One loop iteration on both ranks (the source first: it broadcasts); rank 1's list."""
    modules[0].Receiver().receive()
    return modules[1].Receiver().receive()


def test_a_toggle_rides_the_broadcast_and_is_applied_on_both_ranks_at_one_iteration() -> None:
    skip = [False]
    on_source, on_receiver, source, modules, _ = two_ranks(skip)
    assert iterate(modules) == ["request"]  # the first iteration: nothing decided yet
    first, keep, toggle = record(0, True, False), record(1, True, False), record(2, False, True)
    source.post(first)
    assert iterate(modules) == ["request"]  # SGLang never sees the marker
    source.post(keep)
    iterate(modules)
    skip[0] = True  # an iteration without a broadcast: the toggle waits on every rank
    source.post(toggle)
    iterate(modules)
    skip[0] = False
    assert iterate(modules) == ["request"]
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
    carrier.install(patches, NAMES, module)  # type: ignore[arg-type]
    assert carrier.is_patched and module.broadcast is not before[0]
    patches.undo()
    assert (module.broadcast, module.Receiver.receive) == before
