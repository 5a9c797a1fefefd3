"""bench/policy_vs_live.py: the simulation replays the live fixed-work calls, level by level,
beside what they measured."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT / "bench" / "results" / "live" / "sweep"


@pytest.fixture
def vs_live(bench_module: Callable[[str], ModuleType]) -> ModuleType:
    return bench_module("policy_vs_live")


def test_a_call_s_plan_is_read_from_its_rows(vs_live: ModuleType) -> None:
    waves = vs_live.plan_of(SWEEP / "call26")
    assert waves == vs_live.Plan(
        "call26", "a25", (1, 2, 4, 8, 16, 32, 64, 128), 4, 1, True, 128, 0.0
    )
    levels = vs_live.plan_of(SWEEP / "call29")  # load.py's levels: 2 requests a client
    assert (levels.draft, levels.levels, levels.reps, levels.requests, levels.batch) == (
        "a34",
        (1, 8, 32, 64, 128),
        6,
        2,
        False,
    )
    assert vs_live.plan_of(SWEEP / "call24") is None  # time windows: nothing to replay


def test_the_measured_ratios_are_the_call_s_own(vs_live: ModuleType) -> None:
    """call26/report.md: base 209 and EAGLE-3 369 tokens/s at one request, 15653 and 8982 at
    128 (the turns' means, rounded), the hook 14589 there."""
    found = vs_live.measured(SWEEP / "call26", vs_live.plan_of(SWEEP / "call26"))
    assert found[1][0] == pytest.approx(369 / 209, rel=0.005)
    assert found[128][0] == pytest.approx(8982 / 15653, rel=0.005)
    assert found[128][2] == pytest.approx(14589 / 15653, rel=0.005)
    assert 0 < found[128][1] < 0.05  # four turns, paired


def test_both_kinds_of_call_replay_and_render(vs_live: ModuleType) -> None:
    levels = vs_live.compare([SWEEP / "call26", SWEEP / "call29"], seeds=(1,))
    assert [(x.call, x.level) for x in levels] == [
        *(("call26", c) for c in (1, 2, 4, 8, 16, 32, 64, 128)),
        *(("call29", c) for c in (1, 8, 32, 64, 128)),
    ]
    for x in levels:
        assert math.isfinite(x.sim_ratio) and x.sim_ratio > 0 and 0.5 < x.sim_hook < 1.2
    by = {(x.call, x.level): x for x in levels}
    # at one request speculation's lead is the machine's step ratio times the accept length
    assert by[("call29", 1)].sim_ratio > by[("call26", 1)].sim_ratio > 1.5
    # and it shrinks with the batch, live and simulated
    assert by[("call26", 128)].sim_ratio < by[("call26", 1)].sim_ratio
    text = vs_live.render(levels, "python bench/policy_vs_live.py --seeds 1", 1)
    assert text.count("\n| call2") == 13  # a row a level (the header: "| call |")
