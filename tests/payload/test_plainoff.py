"""The plain off state's switch (payload/plainoff.py) on stand-in objects (plain_fakes.py): what
it retracts, flips and re-admits, and when. Live behaviour: bench/results/live/plain_0.5.16/."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from tests.payload.plain_fakes import (
    CAPTURED,
    NAMES,
    RELEASED,
    Algorithm,
    Batch,
    FutureMap,
    Req,
    Scheduler,
    Worker,
    reset,
)

from sgtrace.payload.patcher import before
from sgtrace.payload.plainoff import PlainOffSwitch
from sgtrace.payload.plainsites import future_map_built


def make_switch(
    monkeypatch: Any, catch_up: bool = False
) -> tuple[PlainOffSwitch, Scheduler, Worker]:
    # as the hook does (runtime mode): the future map's constructor arguments are recorded
    monkeypatch.setattr(FutureMap, "__init__", before(future_map_built)(FutureMap.__init__))
    reset()
    worker = Worker()
    switch = PlainOffSwitch(worker, NAMES, logging.getLogger("test"), catch_up)
    return switch, Scheduler(worker), worker


def test_capture_builds_the_plain_state_and_leaves_the_launched_one(monkeypatch: Any) -> None:
    switch, scheduler, worker = make_switch(monkeypatch)
    launched_map = scheduler.future_map
    assert not switch.ready
    switch.capture(scheduler)
    runner = worker._target_worker.model_runner
    assert CAPTURED == [(Algorithm.NONE, "decode-backend")]
    assert (runner.spec_algorithm, runner.attn_backend, runner.decode_cuda_graph_runner) == (
        Algorithm.EAGLE3,
        "verify-backend",
        "verify-graphs",
    )
    assert switch.ready
    assert sorted(switch.plain_state or {}) == [
        "attn_backend",
        "decode_cuda_graph_runner",
        "graph_mem_usage",
        "spec_algorithm",
    ]
    # the plain future map: built again as a plain server builds it; the launched one stays
    plain_map = switch.future_maps[False]
    assert plain_map == FutureMap("cuda", Algorithm.NONE, relay_topk=True)
    assert plain_map.buffer == ["none buffer"] and launched_map.buffer == ["eagle3 buffer"]
    assert scheduler.future_map is launched_map is switch.future_maps[True]


def test_a_future_map_built_before_the_hook_is_refused_before_anything_changes(
    monkeypatch: Any,
) -> None:
    switch, scheduler, worker = make_switch(monkeypatch)
    scheduler.future_map = object.__new__(FutureMap)  # never recorded
    with pytest.raises(RuntimeError, match="built before the hook"):
        switch.capture(scheduler)
    assert not switch.ready and CAPTURED == []
    assert worker._target_worker.model_runner.spec_algorithm is Algorithm.EAGLE3


def test_a_switch_retracts_flips_and_readmits_after_the_batch_in_flight(monkeypatch: Any) -> None:
    switch, scheduler, worker = make_switch(monkeypatch)
    switch.capture(scheduler)
    # full: admission had stopped for lack of room (SGLang then schedules no prefill)
    running = Batch([Req("a"), Req("b", done=True), Req("c")], batch_is_full=True)
    switch.want_spec_on = False
    switch.before_prefill(scheduler, (running,), {})
    assert not running.batch_is_full  # emptied, it has room: the re-admitted are prefilled
    runner = worker._target_worker.model_runner
    assert RELEASED == [("a", True), ("c", True)]  # into the radix cache; finished ones left
    assert running.reqs == [] and scheduler.waiting_queue == []  # held until results processed
    assert (scheduler.spec_algorithm, scheduler.model_worker) == (
        Algorithm.NONE,
        scheduler.tp_worker,
    )
    assert (runner.spec_algorithm, runner.attn_backend, runner.decode_cuda_graph_runner) == (
        Algorithm.NONE,
        "decode-backend",
        "decode-graphs",
    )
    assert scheduler.future_map is switch.future_maps[False]
    assert switch.future_maps[True].spec_algo is Algorithm.EAGLE3  # the launched map untouched
    switch.before_prefill(scheduler, (Batch([]),), {})  # no second switch while requests are held
    assert switch.switches == 1
    switch.readmit(scheduler)
    assert [r.rid for r in scheduler.waiting_queue] == ["a", "c"]
    # and back on: the launched objects return
    switch.want_spec_on = True
    switch.before_prefill(scheduler, (Batch([]),), {})
    assert (scheduler.spec_algorithm, scheduler.model_worker) == (Algorithm.EAGLE3, worker)
    assert scheduler.future_map is switch.future_maps[True]
    assert (runner.attn_backend, runner.decode_cuda_graph_runner) == (
        "verify-backend",
        "verify-graphs",
    )


@pytest.mark.parametrize(("catch_up", "on_inserts"), [(False, True), (True, False)])
def test_catching_up_leaves_the_tokens_decoded_while_off_uncached(
    monkeypatch: Any, catch_up: bool, on_inserts: bool
) -> None:
    switch, scheduler, _ = make_switch(monkeypatch, catch_up)
    switch.capture(scheduler)
    switch.want_spec_on = False
    switch.before_prefill(scheduler, (Batch([Req("a")]),), {})
    switch.readmit(scheduler)
    switch.want_spec_on = True  # back on: with catch_up, a's KV is released uncached, so its
    switch.before_prefill(scheduler, (Batch([Req("a"), Req("b")]),), {})  # prefill redoes it
    # going off always caches: the prefix then is what the draft KV covers
    assert RELEASED == [("a", True), ("a", on_inserts), ("b", on_inserts)]


def test_the_first_prefill_scheduling_captures_and_the_next_switches(monkeypatch: Any) -> None:
    switch, scheduler, _ = make_switch(monkeypatch)
    switch.want_spec_on = False
    switch.before_prefill(scheduler, (Batch([Req("a")]),), {})
    assert (switch.ready, switch.switches, scheduler.spec_algorithm, RELEASED) == (
        True,
        0,
        Algorithm.EAGLE3,
        [],
    )
    switch.before_prefill(scheduler, (Batch([Req("a")]),), {})
    assert (switch.switches, scheduler.spec_algorithm, RELEASED) == (
        1,
        Algorithm.NONE,
        [("a", True)],
    )
