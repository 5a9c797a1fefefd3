"""bench/policy_stream.py and policy_stream_bench.py: the policies in a closed loop of clients,
steady or changing, on machines made to order and on those built from the live measurements."""

from __future__ import annotations

import csv
import importlib
import random
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bench_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "bench"))


def _module(name: str) -> ModuleType:
    return importlib.import_module(name)


def _machine(on: tuple[tuple[int, float], ...], prefill_s: float, q: float = 0.9) -> object:
    machines = _module("policy_machines")
    off = machines.Curve(((1, 0.005), (16, 0.006), (128, 0.010)))
    return machines.LiveMachine("toy", "toy", q, off, machines.Curve(on), prefill_s)


@pytest.mark.usefixtures("bench_path")
def test_one_client_makes_a_request_per_prefill_and_its_decode_steps() -> None:
    """No speculation, one client, 5 ms steps and a 5 ms prefill: a request of n tokens takes
    one prefill and n - 1 steps, so the rate is the mean length over that time."""
    stream, sim = _module("policy_stream"), _module("policy_sim")
    machine = _machine(((1, 0.008), (128, 0.05)), prefill_s=0.005)
    load = stream.steady(1, stream.SPREAD, seconds=20.0, warmup_s=1.0)
    (result,) = stream.run_stream(sim.Constant(False), machine, load, 1, sim.QUIET, "off")
    assert result.on_steps == 0 and result.toggles == 0  # launched in the constant's state
    # spread lengths: 64-192, mean 128: 128 tokens in 5 ms + 127 * 5 ms
    assert result.tokens / result.seconds == pytest.approx(128 / (0.005 * 128), rel=0.03)


@pytest.mark.usefixtures("bench_path")
def test_fewer_clients_let_requests_finish_unreplaced() -> None:
    stream, sim = _module("policy_stream"), _module("policy_sim")
    machine = _machine(((1, 0.008), (128, 0.05)), prefill_s=0.005)
    load = stream.changing("down", (64, 1, 1), stream.SPREAD, 3.0)
    many, drain, one = stream.run_stream(sim.Constant(False), machine, load, 1, sim.QUIET, "off")
    assert many.on_steps == drain.on_steps == one.on_steps == 0
    # 64 clients make ~64 tokens a 6-7 ms step; once the 64 requests in flight (at most 192
    # tokens each) have drained, one client makes one token a 5 ms step, as one client alone
    assert one.tokens / one.seconds == pytest.approx(128 / (0.005 * 128), rel=0.05)
    assert many.tokens / many.seconds > 20 * one.tokens / one.seconds
    assert many.tokens / many.seconds > drain.tokens / drain.seconds > one.tokens / one.seconds


@pytest.mark.usefixtures("bench_path")
def test_every_server_of_a_run_serves_the_same_requests() -> None:
    stream, machines = _module("policy_stream"), _module("policy_machines")
    rng_a, rng_b = (__import__("random").Random("7/requests") for _ in range(2))
    first = [next(stream.request_stream(stream.HEAVY, 0.5, rng_a)) for _ in range(50)]
    again = [next(stream.request_stream(stream.HEAVY, 0.5, rng_b)) for _ in range(50)]
    assert first == again
    lengths = [r.tokens for r in first]
    assert min(lengths) >= 4 and max(lengths) <= 1024 and len(set(lengths)) > 20
    assert all(len(r.known) == r.tokens + machines.DRAFT_STEPS for r in first)


@pytest.mark.usefixtures("bench_path")
def test_the_oracle_takes_the_better_reference_in_each_segment() -> None:
    stream = _module("policy_stream")
    seg = stream.SegmentResult
    runs = {
        "eagle3": [seg(100, 1.0, 10, 10, 0), seg(100, 1.0, 10, 10, 0)],
        "no-spec": [seg(50, 1.0, 10, 0, 0), seg(200, 1.0, 10, 0, 0)],
        "policy": [seg(100, 1.0, 10, 10, 0), seg(150, 1.0, 10, 0, 1)],
    }
    relative = stream.relative_rates(runs, ("eagle3", "no-spec"), steady_load=False)
    assert relative == {"eagle3": 200 / 300, "no-spec": 250 / 300, "policy": 250 / 300}
    steady = stream.relative_rates(runs, ("eagle3", "no-spec"), steady_load=True)
    assert steady["no-spec"] == 1.0 and steady["eagle3"] == 200 / 250


@pytest.mark.usefixtures("bench_path")
def test_a_bounded_level_answers_its_requests_at_most_c_at_a_time() -> None:
    """load.py's level: 96 requests of 64 tokens, 32 in flight, no speculation: three waves of
    one prefill, 63 decode steps and one more that the ended requests ride (the overlap
    scheduler's; their clients send the next requests after it), every token made, and the
    level ends when the last request is answered."""
    stream, sim = _module("policy_stream"), _module("policy_sim")
    machine = _machine(((1, 0.008), (128, 0.05)), prefill_s=0.004)
    load = stream.bounded(((1, 8), (32, 96)), stream.Lengths("one", 64))
    assert [(s.concurrency, s.requests, s.scored) for s in load.segments] == [
        (8, 8, False),
        (1, 8, False),
        (32, 96, True),
    ]
    (level,) = stream.run_stream(sim.Constant(False), machine, load, 1, sim.QUIET, "off")
    assert (level.tokens, level.steps) == (96 * 64, 3 * 64)
    step = machine.seconds(32, False)
    assert level.seconds == pytest.approx(3 * (0.004 + 64 * step))


@pytest.mark.usefixtures("bench_path")
def test_unknown_lengths_are_refused_by_name() -> None:
    stream = _module("policy_stream")
    with pytest.raises(ValueError, match="'spread', 'heavy' or 'one'"):
        stream.Lengths("uniform").draw(__import__("random").Random(1))


@pytest.mark.usefixtures("bench_path")
def test_quick_mode_writes_each_servers_rate_relative_to_the_better(tmp_path: Path) -> None:
    bench = _module("policy_stream_bench")
    assert bench.main(["--quick", "--out", str(tmp_path)]) == 0
    with open(tmp_path / "policy_stream.csv") as f:
        rows = {(r["server"], r["load"]): r for r in csv.DictReader(f)}
    servers = {"calibrated", "threshold", "threshold-24", bench.STEPS_ONLY, bench.SEEDED}
    servers |= {bench.ON_RESULTS}
    servers |= {"eagle3", "no-spec"}
    assert set(rows) == {(s, f"c={n}") for s in servers for n in bench.QUICK_LEVELS}
    # the good draft at one client: EAGLE-3 more than twice as fast (the live calls)
    assert float(rows[("eagle3", "c=1")]["mean"]) == 1.0
    assert float(rows[("no-spec", "c=1")]["mean"]) < 0.5
    assert float(rows[("calibrated", "c=1")]["mean"]) > 0.97
    text = (tmp_path / "policy_stream.md").read_text()
    assert "| a34 (3.40) | spread | calibrated |" in text
    assert "python bench/policy_stream_bench.py --quick" in text


@pytest.mark.usefixtures("bench_path")
def test_the_calibrated_policy_counts_the_prefills_a_closed_loop_interleaves() -> None:
    """64 clients: a decode step alone pays 6% better without speculation (3.44 tokens in
    28 ms against 1 in 7.7 ms), but each finished request's prefill (7 ms, shared by the requests
    finishing together) interleaves: speculation finishes 3.44 times the requests a step and
    shares the prefills among them, and wins. The policy sees it in the interrupted periods."""
    stream, sim = _module("policy_stream"), _module("policy_sim")
    from sgtrace.payload.policies import make_policy
    from sgtrace.payload.policy import PolicyConfig

    machine = _machine(((1, 0.0085), (64, 0.028), (128, 0.045)), prefill_s=0.007)
    load = stream.steady(64, stream.SPREAD, seconds=30.0, warmup_s=10.0)
    servers = {
        "calibrated": lambda: make_policy(PolicyConfig()),
        "blind": lambda: sim.StepsOnly(make_policy(PolicyConfig())),
        "eagle3": lambda: sim.Constant(True),
        "no-spec": lambda: sim.Constant(False),
    }
    found = stream.simulate(machine, load, (1, 2), servers, ("eagle3", "no-spec"), sim.QUIET)
    rate = {name: sum(r[0] for r in runs) / len(runs) for name, runs in found.items()}
    on = {name: sum(r[1] for r in runs) / len(runs) for name, runs in found.items()}
    assert rate["eagle3"] == 1.0 and rate["no-spec"] < 0.97  # speculation is the better
    assert on["calibrated"] > 0.9 and rate["calibrated"] > 0.98
    assert on["blind"] < 0.2 and rate["blind"] < 0.97  # decode steps alone say off


@pytest.mark.usefixtures("bench_path")
def test_a_seeded_policy_switches_at_a_new_batch_size_without_measuring_it() -> None:
    """Seeded with both states' steps at every bucket, the calibrated policy meeting 64 requests
    for the first time decides from the seed: off (speculation's 29 ms step for 2.5 tokens loses
    to a 7.7 ms plain one) as soon as its dwell allows, no probe; unseeded, it must probe."""
    sim = _module("policy_sim")
    from sgtrace.payload.policy import PRESETS, PolicyConfig

    machine = _machine(((1, 0.008), (128, 0.05)), prefill_s=0.005)
    config = PolicyConfig.from_dict(PRESETS["calibrated"])
    rng = __import__("random").Random(1)

    def first_off(policy: object) -> tuple[int, set[str]]:
        server = sim.Server(policy)
        for _ in range(80):
            step = server.step(machine, 64, lambda on: (2.5,) * 64 if on else None, sim.QUIET, rng)
            if not step.decision.spec_on:
                return step.obs.step, {step.decision.reason.value}
        return -1, set()

    seeded = first_off(sim.seeded(config, machine, (1, 2, 4, 8, 16, 32, 64, 128)))
    plain = first_off(_module("sgtrace.payload.policies").make_policy(config))
    assert seeded == (10, {"measured"})  # the dwell from the start: 8 periods and the lag
    assert plain[1] == {"explore"}  # a probe of the plain state: 8 periods more before it knows


@pytest.mark.usefixtures("bench_path")
def test_a_switch_decided_on_arrival_runs_from_the_grown_batchs_first_step() -> None:
    """A policy that measured both states at 4 and 64 requests (speculation the better at 4,
    off at 64) sees a burst arrive: asked on the arrival, the burst's first decode step runs off;
    asked on results only, the overlap scheduler's lag runs two steps speculating first."""
    sim = _module("policy_sim")
    from tests.hooks.test_policy_arrivals import measured, seconds

    from sgtrace.payload.calibrated import CalibratedPolicy
    from sgtrace.payload.policy import PolicyConfig, PolicyKind

    class Machine:
        def seconds(self, batch_size: int, spec_on: bool) -> float:
            return seconds(batch_size, spec_on)

    def burst(policy: object) -> list[bool]:
        server = sim.Server(policy)
        server.count = 100  # the results the measured state counted
        rng = random.Random(1)
        for _ in range(3):  # speculating at 4 requests
            server.step(Machine(), 4, lambda on: (2.5,) * 4 if on else None, sim.QUIET, rng)
        server.arrive(64, 60)
        steps = [server.step(Machine(), 64, lambda on: (2.5,) * 64 if on else None, sim.QUIET, rng)]
        steps += [
            server.step(Machine(), 64, lambda on: (2.5,) * 64 if on else None, sim.QUIET, rng)
        ]
        return [s.ran_on for s in steps]

    config = PolicyConfig(kind=PolicyKind.CALIBRATED)
    assert burst(CalibratedPolicy(config, measured((4, 64)))) == [False, False]
    assert burst(sim.OnResults(CalibratedPolicy(config, measured((4, 64))))) == [True, True]


@pytest.mark.usefixtures("bench_path")
def test_a_closed_loop_that_idled_once_is_probed_where_its_requests_run() -> None:
    """128 clients arrive on an idle server at once, then keep the batch full: no speculation
    wins there (1 token in 10 ms against 3.44 in 60 ms). Probes wait for a wave's arrival only
    where such arrivals repeat; had they waited after this one, speculation would have run the
    first 341 steps of 60 ms (simulated, the closed loops of 128 clients lost 13-26%)."""
    stream, sim = _module("policy_stream"), _module("policy_sim")
    from sgtrace.payload.policies import make_policy
    from sgtrace.payload.policy import PolicyConfig

    machine = _machine(((1, 0.0085), (64, 0.028), (128, 0.060)), prefill_s=0.006)
    load = stream.steady(128, stream.SPREAD, seconds=12.0, warmup_s=3.0)
    servers = {
        "calibrated": lambda: make_policy(PolicyConfig()),
        "eagle3": lambda: sim.Constant(True),
        "no-spec": lambda: sim.Constant(False),
    }
    found = stream.simulate(machine, load, (1, 2), servers, ("eagle3", "no-spec"), sim.QUIET)
    rate = {name: sum(r[0] for r in runs) / len(runs) for name, runs in found.items()}
    assert rate["no-spec"] == 1.0 and rate["eagle3"] < 0.8  # no speculation is the better
    assert rate["calibrated"] > 0.97
