"""bench/policy_bench.py: the policies on machines built from the live measurements, driven
through the crossover plan's fixed-work turns; its quick mode, and a machine made to order."""

from __future__ import annotations

import csv
import importlib
import random
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    return importlib.import_module("policy_bench")


def test_quick_mode_writes_each_servers_time_relative_to_the_better(
    bench: ModuleType, tmp_path: Path
) -> None:
    assert bench.main(["--quick", "--out", str(tmp_path)]) == 0
    with open(tmp_path / "policy.csv") as f:
        rows = {(r["draft"], r["server"], int(r["level"])): r for r in csv.DictReader(f)}
    servers = {"calibrated", "threshold", "threshold-24", "eagle3", "no-spec"}
    assert {(d, s, n) for d, s, n in rows} == {
        (d, s, n) for d in ("a34", "a12") for s in servers for n in bench.QUICK_LEVELS
    }

    def mean(draft: str, server: str, level: int) -> float:
        return float(rows[(draft, server, level)]["relative_mean"])

    # the good draft makes one request 2.3x as fast (calls 1-24): EAGLE-3 is the better there
    assert mean("a34", "eagle3", 1) == 1.0 and mean("a34", "no-spec", 1) < 0.5
    # the poor draft never pays: no speculation is the better at every level
    assert all(mean("a12", "no-spec", n) == 1.0 > mean("a12", "eagle3", n) for n in (1, 128))
    assert float(rows[("a34", "calibrated", 1)]["on_share"]) > 0.9
    assert all(float(rows[("a12", "calibrated", n)]["on_share"]) < 0.05 for n in (1, 16, 128))
    text = (tmp_path / "policy.md").read_text()
    assert (
        "| a34 (3.40) | one length | calibrated |" in text
        and "python bench/policy_bench.py --quick" in text
    )


def test_the_calibrated_policy_decides_right_away_from_a_clear_crossover(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Speculation 2x the goodput at one request, half of it at 128 (crossover near 16): in
    quiet turns the calibrated policy speculates at 1-4 requests and not at 64-128."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    machines = importlib.import_module("policy_machines")
    waves = importlib.import_module("policy_waves")
    sim = importlib.import_module("policy_sim")
    from sgtrace.payload.policies import make_policy
    from sgtrace.payload.policy import PRESETS, PolicyConfig

    off = machines.Curve(((1, 0.005), (16, 0.006), (128, 0.010)))
    on = machines.Curve(((1, 0.0085), (16, 0.016), (128, 0.068)))
    machine = machines.LiveMachine("toy", "toy", 0.9, off, on, 0.005)  # accept length 3.44
    gains = {n: machine.accept_length * off.at(n) / on.at(n) for n in (1, 4, 64, 128)}
    assert gains[1] > 1.9 and gains[4] > 1.5 and gains[64] < 0.7 and gains[128] < 0.55
    load = waves.Load((1, 4, 64, 128), reps=3)
    policy = make_policy(PolicyConfig.from_dict(PRESETS["calibrated"]))
    setting = waves.Run(machine, load, waves.ONE_LENGTH, 1, sim.QUIET, None)
    run = waves.run_server(policy, setting, "cal")
    share = {
        n: sum(w.on_steps for w in run if w.level == n) / sum(w.steps for w in run if w.level == n)
        for n in load.levels
    }
    assert share[1] > 0.9 and share[4] > 0.9, share
    assert share[64] < 0.1 and share[128] < 0.1, share


def test_the_simulated_turns_send_what_the_live_load_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm-up wave and the spread of lengths are those of sweep_fixed.py and
    sweep_requests.py (64-192 new tokens for the spread shape)."""
    import random

    from tests.bench.test_live_sweep import script

    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    waves = importlib.import_module("policy_waves")
    assert waves.WARMUP_TOKENS == script("sweep_fixed").FIXED_WARMUP_TOKENS
    new_tokens = script("sweep_requests").new_tokens
    live = {new_tokens(seed, 128, waves.SPREAD.spread) for seed in range(2000)}
    simulated = waves.turn_requests(2000, 128, waves.SPREAD.spread, 0.5, random.Random(1))
    assert (
        (min(live), max(live))
        == (64, 192)
        == (min(r.tokens for r in simulated), max(r.tokens for r in simulated))
    )
    assert {r.tokens for r in waves.turn_requests(5, 128, 0.0, 0.5, random.Random(1))} == {128}


def test_one_cell_seed_by_seed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """bench/policy_seeds.py: each seed's level of one draft and shape on the quiet machine,
    and the switches with --toggles; an unknown draft is refused with the plan's drafts."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    seeds = importlib.import_module("policy_seeds")
    assert seeds.main(["a12", "one", "--seeds", "2", "--levels", "1", "128", "--toggles"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "seed level hook/better eagle3/no-spec on_share"
    rows = [line.split() for line in lines[1:] if not line.startswith("  switches:")]
    assert [(r[0], r[1]) for r in rows] == [("1", "1"), ("1", "128"), ("2", "1"), ("2", "128")]
    for _, _, hook, eagle3, on_share in rows:
        # the poor draft never pays: EAGLE-3 behind no speculation, the hook off and near it
        assert float(eagle3) < 0.9 and float(on_share) < 0.1 and float(hook) > 0.9
    assert sum(line.startswith("  switches: [(") for line in lines) == 2  # it switched off
    with pytest.raises(SystemExit):
        seeds.main(["a99", "one"])
    assert "one of a12, a25, a34" in capsys.readouterr().err


def test_slow_turns_stretch_one_turn_in_every_and_say_so(bench: ModuleType, tmp_path: Path) -> None:
    """``--slow-turns FACTOR EVERY``: besides the A/A pairs' turn noise, one turn in EVERY runs
    FACTOR times slower (policy_machines.SlowTurns); the tables name the option."""
    machines = importlib.import_module("policy_machines")
    base = machines.TurnNoise({16: (0.0,)})
    assert base.factor(16, random.Random(1)) == 1.0
    always = machines.SlowTurns(base.samples, 1.8, 1)
    assert always.factor(16, random.Random(1)) == pytest.approx(1.8)
    rng = random.Random(2)
    draws = [machines.SlowTurns(base.samples, 1.8, 7).factor(16, rng) for _ in range(7000)]
    assert {round(d, 6) for d in draws} == {1.0, 1.8}
    assert 800 < sum(d > 1.5 for d in draws) < 1200  # one in seven: 1000 expected
    assert bench.main(["--quick", "--slow-turns", "1.8", "7", "--out", str(tmp_path)]) == 0
    assert "--slow-turns 1.8 7" in (tmp_path / "policy.md").read_text()
