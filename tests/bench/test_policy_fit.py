"""bench/policy_fit.py: a plan's draft fitted to its live fixed-work waves."""

from __future__ import annotations

import dataclasses
import importlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT / "bench" / "results" / "live" / "sweep"


@pytest.fixture
def fit(bench_module: Callable[[str], ModuleType]) -> ModuleType:
    return bench_module("policy_fit")


def _toy(fit: ModuleType, on: tuple[tuple[int, float], ...]) -> object:
    machines = importlib.import_module("policy_machines")
    off = machines.Curve(((1, 0.005), (16, 0.006), (128, 0.010)))
    return machines.LiveMachine("toy", "toy", 0.7, off, machines.Curve(on), 0.0055)


def test_the_fit_recovers_a_known_step_from_its_waves(fit: ModuleType) -> None:
    """Waves simulated on a machine whose speculative step is known: fitted from a curve 30%
    off at one level and 20% at the other, the fit finds the known step again."""
    truth = ((1, 0.0066), (16, 0.0110), (128, 0.0300))
    plan = fit.Plan("toy", "toy", (1, 16, 128), 1, 1, True, 32, 0.0)
    targets = fit.simulated_ratios(_toy(fit, truth), plan, fit.FIT_SEEDS)
    start = _toy(fit, ((1, 0.0066), (16, 0.0143), (128, 0.0240)))
    curve, rounds = fit.fit_on(start, [plan], targets)
    assert 1 < rounds <= fit.ROUNDS
    for (x, want), (y, got) in zip(truth, curve.points, strict=True):
        assert x == y and got == pytest.approx(want, rel=0.01)


def test_a_fit_that_does_not_settle_is_refused(
    fit: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = fit.Plan("toy", "toy", (1, 16), 1, 1, True, 32, 0.0)
    machine = _toy(fit, ((1, 0.0066), (16, 0.0110)))
    monkeypatch.setattr(fit, "ROUNDS", 1)
    with pytest.raises(ValueError, match="did not settle"):
        fit.fit_on(machine, [plan], {1: 1.0, 16: 1.0})  # far from what the toy makes


def test_the_fair_draft_is_fitted_to_its_recorded_waves(fit: ModuleType) -> None:
    """call26: the crossover plan's waves with the fair draft (call33: the good draft's, spread
    lengths; call34, the same plan on an H100, is left out: the machines are the H200's); the
    machines built for the benchmarks then make its EAGLE-3 / base as measured, level by
    level."""
    plans = fit.wave_plans(SWEEP)
    assert {d: [p.call for p in v] for d, v in plans.items()} == {
        "a25": ["call26"],
        "a34": ["call33"],
    }
    _, _, machines = fit.live_machines(SWEEP)
    by = {m.draft: m for m in machines}
    assert by["a25"].source.endswith("fitted to call26")
    assert by["a34"].source.endswith("fitted to call33") and "fitted" not in by["a12"].source
    live = fit.measured(SWEEP / "call26", plans["a25"][0])
    simulated = fit.simulated_ratios(by["a25"], plans["a25"][0], fit.FIT_SEEDS)
    for level, (ratio, _, _) in live.items():
        assert simulated[level] == pytest.approx(ratio, rel=fit.TOLERANCE * 1.01)
    unfitted = dataclasses.replace(by["a25"], on=by["a34"].on)  # any other curve: far off
    assert fit.simulated_ratios(unfitted, plans["a25"][0], (1,))[32] != pytest.approx(
        live[32][0], rel=0.05
    )


def test_a_call_on_another_card_is_no_plan_of_the_machines(fit: ModuleType, tmp_path: Path) -> None:
    """call34 ran the crossover plan on an H100 (its ``device.json``): without that file the
    same rows are a plan of the good draft, with it none."""
    copy = tmp_path / "call34"
    shutil.copytree(SWEEP / "call34", copy)
    assert fit.plan_of(copy) is None
    (copy / "device.json").unlink()
    found = fit.plan_of(copy)
    assert found is not None and (found.draft, found.levels) == ("a34", (32, 64, 128))


def test_a_call_on_another_depth_is_no_plan_of_the_machines(
    fit: ModuleType, tmp_path: Path
) -> None:
    """call53 ran the good draft's one length at 128 on an H200, with the 24-layer target (its
    ``models.json``): the machines are the 32-layer target's, so it is no plan of them; said
    32 layers, the same rows are."""
    copy = tmp_path / "call53"
    shutil.copytree(SWEEP / "call53", copy)
    assert fit.plan_of(copy) is None
    models = json.loads((copy / "models.json").read_text())
    (copy / "models.json").write_text(json.dumps({**models, "layers": 32}))
    found = fit.plan_of(copy)
    assert found is not None and (found.draft, found.levels) == ("a34", (128,))
