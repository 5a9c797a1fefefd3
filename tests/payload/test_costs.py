"""The hook's cost meter: the seconds of the hook's calls, summed and logged every so many
calls, and the garbage collector's runs in the process, timed through ``gc.callbacks``."""

from __future__ import annotations

import gc
import logging
import types

import pytest
from tests.payload.payload_support import hook_config
from tests.payload.plain_fakes import Req

from sgtrace.payload import registry
from sgtrace.payload.costs import CostMeter
from sgtrace.payload.hook import Hook
from sgtrace.payload.policy import PolicyConfig, PolicyKind


def test_a_summary_every_so_many_calls_then_counting_afresh() -> None:
    lines: list[str] = []
    meter = CostMeter(lines.append, every=3)
    for seconds in (0.00001, 0.00002, 0.00003, 0.5):
        meter.add(seconds)
    assert lines == [
        "3 calls, 20.0 us a call in the hook (0.0 ms of collections in them left out); "
        "garbage collections: 0, 0.0 ms, the longest 0.0 ms"
    ]
    assert (meter.calls, meter.hook_s) == (1, 0.5)  # the fourth call opens the next summary


def test_a_collection_inside_a_call_is_left_out_of_the_hooks_seconds() -> None:
    """The hook's guarded call reads the collector's seconds before and after: a collection
    that ran inside it counts as the collector's."""
    hook = Hook(hook_config(PolicyConfig(kind=PolicyKind.CALIBRATED)))
    lines: list[str] = []
    hook.costs = CostMeter(lines.append, every=1, pause_s=3600.0)
    hook.costs.start()
    try:
        hook.guarded("collect", lambda: gc.collect())
    finally:
        hook.costs.stop()
    [line] = lines
    within = float(line.split("(")[1].split(" ms")[0])
    assert hook.costs.collected_s > 0 and within == pytest.approx(
        hook.costs.collected_s * 1e3, abs=0.05
    )
    per_call = float(line.split(" us a call")[0].split(", ")[1])
    assert per_call * 1e-3 < within  # the call is mostly the collection, left out


def test_the_collector_runs_are_timed_and_long_ones_logged_at_once() -> None:
    lines: list[str] = []
    meter = CostMeter(lines.append, every=10**9, pause_s=0.0)  # every collection is "long"
    meter.start()
    meter.start()  # once: a second start adds no second callback
    try:
        assert gc.callbacks.count(meter.on_gc) == 1
        gc.collect()
    finally:
        meter.stop()
    assert meter.collections >= 1 and meter.gc_s > 0 and meter.longest_s <= meter.gc_s
    assert any(line.startswith("garbage collection of generation 2: ") for line in lines)
    seen = meter.collections
    gc.collect()  # stopped: no longer timed
    assert meter.collections == seen and meter.on_gc not in gc.callbacks


def test_a_collection_shorter_than_the_pause_is_only_counted() -> None:
    lines: list[str] = []
    meter = CostMeter(lines.append, pause_s=3600.0)
    meter.start()
    try:
        gc.collect()
    finally:
        meter.stop()
    assert meter.collections >= 1 and lines == []


def test_the_hook_times_its_own_calls_and_logs_the_summary(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hook = Hook(hook_config(PolicyConfig(kind=PolicyKind.CALIBRATED)))
    hook.costs.every = 2
    hook.carrier.post = lambda record: None  # type: ignore[method-assign]
    hook.worker, hook.rank = object(), 0
    batch = types.SimpleNamespace(reqs=[Req("a")], forward_iter=1)
    with caplog.at_level(logging.INFO, logger="sgtrace_hook"):
        for _ in range(2):
            hook.guarded("on_decode_result", hook.on_decode_result, batch, None)
    [line] = [r.getMessage() for r in caplog.records if " cost: " in r.getMessage()]
    assert line.startswith("sgtrace-hook rank=0 cost: 2 calls, ")
    assert hook.costs.calls == 0  # counting afresh
    # a call that fails is counted too, and the hook stops deciding (fail-safe)
    hook.guarded("on_decode_result", hook.on_decode_result, None, None)
    assert hook.failed and hook.costs.calls == 1


def test_only_the_installed_hook_times_the_collector() -> None:
    """A hook object that is not the process's (a test's, or one that failed to install) adds
    no callback to the collector: it would outlive it, and log into other code's records."""
    loose = Hook(hook_config(PolicyConfig(kind=PolicyKind.CALIBRATED)))
    try:
        loose.attach(types.SimpleNamespace())
        assert not loose.costs.is_started and loose.costs.on_gc not in gc.callbacks
    finally:
        loose.close()  # its import patcher
    hook = Hook(hook_config(PolicyConfig(kind=PolicyKind.CALIBRATED)))
    registry.register(registry.PluginKind.HOOK, hook)
    try:
        hook.attach(types.SimpleNamespace())
        assert hook.costs.is_started and gc.callbacks.count(hook.costs.on_gc) == 1
    finally:
        registry.uninstall(registry.PluginKind.HOOK)  # closes it: the callback goes
    assert hook.costs.on_gc not in gc.callbacks
