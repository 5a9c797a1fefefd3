"""The live benchmark's host-side scripts: calibration, report, load windows, synthetic models.

They run on small hand-made sweeps whose answers are known, and read the recorded sweeps under
``bench/results/live/sweep`` only as inputs. What the recorded sweeps conclude (which server won
where) is checked by ``bench/checks/test_recorded_sweeps.py`` (``nox -s bench``), not here.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIVE = ROOT / "bench" / "live"
SWEEP = ROOT / "bench" / "results" / "live" / "sweep"


def script(name):
    """bench/live/NAME.py as a module, as ``python3 bench/live/NAME.py`` runs it: its siblings
    (``import plan_schema``) found in bench/live while it loads."""
    spec = importlib.util.spec_from_file_location(f"live_{name}", LIVE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    sys.path.insert(0, str(LIVE))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(LIVE))
    return module


def rows(label, rates, accept=None):
    return [
        {"label": label, "concurrency": c, "tok_per_s": r, "tokens_per_verify": accept}
        for c, r in rates.items()
    ]


def test_calibration_puts_the_band_at_the_measured_crossover():
    calibrate = script("calibrate_policy").calibrate
    base = rows("base", {1: 100, 8: 800, 16: 1600, 32: 3200, 64: 6400})
    spec = rows("eagle3-high", {1: 250, 8: 1200, 16: 1700, 32: 3000, 64: 5000}, accept=3.5)
    policy, evidence = calibrate(base + spec, "base", "eagle3-high", max_batch=128)
    # r(16) = 1.0625, r(32) = 0.9375: log r crosses 0 at 48.5% of the way in log c, c = 22.4
    assert (policy["on_below"], policy["off_above"]) == (16, 23)
    assert policy["min_accept_length"] == pytest.approx(3.5 / 2.5)
    assert policy["on_delay_steps"] == 32  # not measured: the dips between waves are shorter
    assert evidence[32]["ratio"] == pytest.approx(3000 / 3200, abs=1e-3)


@pytest.mark.parametrize(
    ("spec_rates", "band"),
    [
        ({1: 300, 64: 7000}, (64, 129)),  # speculation wins everywhere: never off by load
        ({1: 90, 64: 7000}, (0, 1)),
    ],  # loses already at 1: off from the first request
)
def test_calibration_edges(spec_rates, band):
    calibrate = script("calibrate_policy").calibrate
    data = rows("base", {1: 100, 64: 6400}) + rows("eagle3-high", spec_rates, accept=3.0)
    policy, _ = calibrate(data, "base", "eagle3-high", max_batch=128)
    assert (policy["on_below"], policy["off_above"]) == band


def test_calibration_without_the_off_server_says_which_label_is_missing():
    calibrate = script("calibrate_policy").calibrate
    with pytest.raises(SystemExit, match="plainoff-high"):
        calibrate(rows("base", {1: 100}), "plainoff-high", "base", max_batch=128)


def test_request_tokens_count_by_the_part_of_their_life_inside_a_window():
    in_window = script("sweep_load").in_window
    assert in_window(0.0, 2.0, 1.0, 5.0) == pytest.approx(0.5)
    assert in_window(2.0, 3.0, 0.0, 10.0) == 1.0
    assert in_window(5.0, 6.0, 0.0, 4.0) == 0.0
    assert in_window(1.0, 1.0, 0.0, 4.0) == 0.0  # zero-length: counted nowhere


def test_repeats_of_a_level_pool_their_windows():
    merged = script("sweep_report").merged
    one = {
        "label": "base",
        "concurrency": 64,
        "window_tok_per_s": [100.0, 110.0],
        "requests": 10,
        "errors": 0,
        "tokens_per_verify": None,
    }
    two = dict(one, window_tok_per_s=[90.0, 100.0], requests=12)
    row = merged([one, two])
    assert row["tok_per_s"] == pytest.approx(100.0)
    assert row["spread_pct"] == pytest.approx(20.0)
    assert (row["requests"], row["repeats"]) == (22, 2)
    # windows 100, 110, 90, 100: sample sd 8.165, over sqrt(4), in % of 100
    assert row["se_pct"] == pytest.approx(4.08, abs=0.01)
    assert merged([dict(one, window_tok_per_s=[100.0])])["se_pct"] is None


def test_calibration_averages_the_runs_of_a_level():
    calibrate = script("calibrate_policy").calibrate
    base = rows("base", {1: 100, 64: 6400}) + rows("base", {1: 100, 64: 5600})
    spec = rows("eagle3-high", {1: 250, 64: 6000}, accept=3.5)
    _, evidence = calibrate(base + spec, "base", "eagle3-high", max_batch=128)
    assert evidence[64]["ratio"] == pytest.approx(1.0)  # 6000 over the mean of 6400 and 5600


def test_spread_request_lengths_are_reproducible_and_centred():
    new_tokens = script("sweep_load").new_tokens
    assert new_tokens(7, 128, 0.0) == 128
    lengths = [new_tokens(seed, 128, 0.5) for seed in range(2000)]
    assert lengths == [new_tokens(seed, 128, 0.5) for seed in range(2000)]
    assert (min(lengths), max(lengths)) == (64, 192)
    assert sum(lengths) / len(lengths) == pytest.approx(128, abs=3)


def test_divergence_reads_per_prompt_greedy_lines():
    runs = script("greedy_divergence").runs
    lines = [
        {"label": "base", "pass": "serial", "prompt": 1, "output_ids": [5, 6]},
        {"label": "base", "pass": "serial", "prompt": 0, "output_ids": [3, 4]},
        {"label": "base", "greedy_expected": "2/2"},
        {"label": "eagle3", "pass": "serial", "outputs": [[3, 4], [5, 6]]},
    ]
    assert runs(lines) == [
        {"label": "eagle3", "pass": "serial", "outputs": [[3, 4], [5, 6]]},
        {"label": "base", "pass": "serial", "outputs": [[3, 4], [5, 6]]},
    ]


def test_profile_summary_sums_kernels(tmp_path, capsys, monkeypatch):
    trace = {
        "traceEvents": [
            {"cat": "kernel", "name": "gemm", "ts": 100.0, "dur": 1500.0},
            {"cat": "kernel", "name": "gemm", "ts": 2600.0, "dur": 500.0},
            {"cat": "kernel", "name": "attn", "ts": 3100.0, "dur": 1000.0},
            {"cat": "cpu_op", "name": "aten::mm", "ts": 0.0, "dur": 9000.0},
        ]
    }
    (tmp_path / "x-TP-0.trace.json").write_text(json.dumps(trace))
    monkeypatch.setattr(sys, "argv", ["p", str(tmp_path), "--label", "s", "--steps", "2"])
    script("profile_summary").main()
    line = json.loads(capsys.readouterr().out)
    assert line["gpu_ms_total"] == pytest.approx(3.0)
    assert line["gpu_ms_per_step"] == pytest.approx(1.5)
    # kernels from 0.1 ms to 4.1 ms: 2 ms per step, the GPU busy 3 of those 4 ms
    assert line["span_ms_per_step"] == pytest.approx(2.0)
    assert line["gpu_busy"] == pytest.approx(0.75)
    assert line["top_kernels"][0] == {
        "kernel": "gemm",
        "ms": 2.0,
        "share": pytest.approx(2 / 3, abs=1e-4),
        "launches_per_step": 1.0,
    }
    assert line["with_cpu"] is False and line["host_frames"] == []


def test_profile_summary_names_who_launched_each_kernel(tmp_path, capsys, monkeypatch):
    frame = "sglang/srt/speculative/eagle_worker_v2.py(1217): _build_trivial_verify_input"
    thread = {"ph": "X", "pid": 1, "tid": 7}
    trace = {
        "traceEvents": [
            # two steps; each: an own frame, inside it aten::fill_, inside that the launch
            *(
                dict(thread, cat="python_function", name=frame, ts=t, dur=50.0)
                for t in (0.0, 1000.0)
            ),
            *(
                dict(thread, cat="python_function", name="torch/nn/x.py(1): f", ts=t, dur=40.0)
                for t in (5.0, 1005.0)
            ),
            *(
                dict(thread, cat="cpu_op", name="aten::fill_", ts=t, dur=20.0)
                for t in (10.0, 1010.0)
            ),
            *(
                dict(
                    thread,
                    cat="cuda_runtime",
                    name="cudaLaunchKernel",
                    ts=t,
                    dur=5.0,
                    args={"correlation": c},
                )
                for t, c in ((12.0, 1), (1012.0, 2))
            ),
            # launched outside any op or own frame
            dict(
                thread,
                cat="cuda_runtime",
                name="cudaLaunchKernel",
                ts=500.0,
                dur=5.0,
                args={"correlation": 3},
            ),
            {
                "ph": "X",
                "cat": "kernel",
                "name": "fill",
                "ts": 20.0,
                "dur": 300.0,
                "args": {"correlation": 1},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "fill",
                "ts": 1020.0,
                "dur": 300.0,
                "args": {"correlation": 2},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "gemm",
                "ts": 510.0,
                "dur": 100.0,
                "args": {"correlation": 3},
            },
        ]
    }
    (tmp_path / "x.trace.json").write_text(json.dumps(trace))
    monkeypatch.setattr(sys, "argv", ["p", str(tmp_path), "--label", "s", "--steps", "2"])
    script("profile_summary").main()
    line = json.loads(capsys.readouterr().out)
    fill, gemm = line["top_kernels"]
    assert line["with_cpu"] is True
    assert fill["kernel"] == "fill" and fill["launches_per_step"] == 1.0
    assert fill["launched_by"] == {"op": "aten::fill_", "frame": frame}
    assert gemm["launched_by"] == {"op": None, "frame": None}
    # the own frame only (torch's is not named), 50 us per step
    assert line["host_frames"] == [{"frame": frame, "ms_per_step": 0.05, "calls_per_step": 1.0}]


def test_synthetic_pair_has_the_acceptance_it_was_built_for(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    argv = [
        "make_synth_models.py",
        str(tmp_path),
        "--hidden",
        "256",
        "--inter",
        "512",
        "--layers",
        "8",
        "--heads",
        "4",
        "--kv-heads",
        "2",
        "--vocab",
        "2048",
        "--accept",
        "high=0.9",
        "--accept",
        "low=0.2",
        "--check",
        "--device",
        "cpu",
    ]
    monkeypatch.setattr(sys, "argv", argv)
    script("make_synth_models").main()
    info = json.loads(capsys.readouterr().out)
    assert info["check"]["target_next_is_plus_one"] == 1.0
    for name in ("high", "low"):
        got = info["check"][name]
        assert got["accept_length_checked"] == pytest.approx(got["accept_length_expected"], abs=0.1)
    config = json.loads((tmp_path / "draft-high" / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLMEagle3"]


@pytest.mark.network
def test_prepared_sweep_directories_on_the_real_release(tmp_path, sglang_source):
    from sgtrace.hooks.policy_config import load_policy_config
    from sgtrace.payload.policies import policy_from_dict
    from sgtrace.payload.policy import Observation

    prepare = script("prepare_sweep")
    policy = load_policy_config(SWEEP / "policy_call2.json")
    mid = load_policy_config(SWEEP / "policy_call8.json")
    dirs = prepare.write_dirs(sglang_source("0.5.16"), policy, tmp_path, [("mid", mid)])
    names = {d.name: sorted(p.name for p in d.iterdir()) for d in dirs}
    assert list(names) == ["hook", "hooktraced", "traced", "plainoff", "cal", "hook-mid"]
    assert "sgtrace_hook.json" in names["hook"] and "sgtrace_tracer.json" not in names["hook"]
    assert {"sgtrace_hook.json", "sgtrace_tracer.json"} <= set(names["hooktraced"])
    assert "sgtrace_hook.json" not in names["traced"] and "sgtrace_tracer.json" in names["traced"]
    assert all("sgtrace_payload" in files for files in names.values())
    options = {
        name: json.loads((tmp_path / name / "sgtrace_hook.json").read_text())["options"]
        for name in ("hook", "hooktraced", "plainoff", "cal", "hook-mid")
    }  # the plan's hook.log_measurements (default true), off the plain decode path
    want = {"log_measurements": True, "catch_up": False, "off_state": "plain"}
    assert list(options.values()) == [want] * 5
    written = json.loads((tmp_path / "hook" / "sgtrace_hook.json").read_text())["policy"]
    assert (written["on_below"], written["min_accept_length"]) == (128, 1.366)
    own = json.loads((tmp_path / "hook-mid" / "sgtrace_hook.json").read_text())["policy"]
    assert (own["on_below"], own["off_above"], own["on_delay_steps"]) == (32, 35, 32)
    # cal: the calibrated policy with its defaults, whatever --policy was
    cal = json.loads((tmp_path / "cal" / "sgtrace_hook.json").read_text())["policy"]
    assert (cal["kind"], cal["preset"]) == ("calibrated", "calibrated")
    # held off: prepare_hook_check.py's plain_off policy, the batch-size preset held off
    plain = json.loads((tmp_path / "plainoff" / "sgtrace_hook.json").read_text())
    assert plain["policy"]["preset"] == "batch-size"
    held = policy_from_dict(plain["policy"])
    for step, batch in enumerate((1, 1, 64, 1)):  # off from the first step, at any batch
        decision = held.decide(Observation(step, batch, (4.0,), spec_on=True))
        assert decision.spec_on is False


def write_sweep(run, lines):
    run.mkdir()
    (run / "sweep.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def level(label, conc, windows, accept=None):
    return {
        "label": label,
        "concurrency": conc,
        "tok_per_s": sum(windows) / len(windows),
        "window_tok_per_s": windows,
        "requests": 10,
        "errors": 0,
        "tokens_per_verify": accept,
    }


def test_replicas_of_any_server_are_noise_unless_pooled(tmp_path, capsys, monkeypatch):
    """LABEL+R is a second server of LABEL: gray, not compared; --pool-replicas pools them."""
    report = script("sweep_report")
    write_sweep(
        tmp_path / "callx",
        [
            level("base", 64, [1000.0, 1000.0]),
            level("base-b", 64, [960.0, 960.0]),
            level("eagle3-high", 64, [900.0, 900.0], accept=3.4),
            level("hookcold-high", 64, [940.0, 940.0], accept=1.0),
            level("hookcold-high+b", 64, [1000.0, 1000.0], accept=1.0),
        ],
    )
    data, _ = report.load([tmp_path / "callx"])
    labels = {r["label"]: r for r in data}
    assert labels["hookcold-high+b"]["replica"] == "b"
    assert labels["hookcold-high+b"]["primary"] == "hookcold-high"
    assert (labels["base-b"]["draft"], labels["base-b"]["primary"]) == ("", "base")
    # unpooled: the hook's primary server alone, 940 against base's 1000
    (one,) = report.comparison(data)
    assert one["hook_vs_best_pct"] == pytest.approx(-6.0)
    assert one["hook_tokens_per_verify"] == 1.0  # off through the level
    pairs = {(p["server"], p["against"]): p["diff_pct"] for p in report.same_work(data)}
    assert pairs == {("base-b", "base"): -4.0, ("hookcold-high+b", "hookcold-high"): 6.4}
    # pooled: (940 + 1000) / 2 against (1000 + 960) / 2
    pooled = report.pooled(data)
    assert {r["label"] for r in pooled} == {"base", "eagle3-high", "hookcold-high"}
    (one,) = report.comparison(pooled)
    assert one["hook_vs_best_pct"] == pytest.approx(100 * (970 / 980 - 1), abs=0.05)
    assert next(r for r in pooled if r["label"] == "base")["servers"] == 2
    monkeypatch.setattr(sys, "argv", ["p", str(tmp_path / "callx"), "--pool-replicas"])
    report.main()
    text = capsys.readouterr().out
    assert "| callx | hookcold | high | 64 | 980 | 900 |  | 970 | -1.0% | 2.1% |  | 1.00 |" in text
    assert "| callx | hookcold-high+b | hookcold-high | 64 | +6.4% |" in text


def test_calls_pool_their_paired_comparisons_by_inverse_variance():
    report = script("sweep_report")

    def compared(call, conc, pct, se):
        keys = {"hook_kind": "hookcold", "draft": "high", "concurrency": conc}
        return {"call": call, **keys, "paired_pct": pct, "paired_se_pct": se}

    comp = [
        compared("call1", 8, -4.0, 2.0),
        compared("call2", 8, 2.0, 1.0),  # four times the weight of call1's
        compared("call3", 8, 9.0, None),  # no paired error: left out
        compared("call1", 16, 1.0, 1.0),  # one call only: nothing to pool
    ]
    (pooled,) = report.across_calls(comp)
    assert pooled["calls"] == ["call1", "call2"] and pooled["concurrency"] == 8
    assert (pooled["paired_pct"], pooled["paired_se_pct"]) == (0.8, 0.9)


def test_a_hook_is_compared_only_where_its_own_call_measured_it():
    # call 16 was cut after three turns: its hook ran at 16 only, its base at 16 and 64; call
    # 15 measured everything. The report may rescale a missing EAGLE-3 from call 15 by the two
    # calls' base, never a missing hook
    report = script("sweep_report")
    data, _ = report.load([SWEEP / "call15", SWEEP / "call16"])
    comp = report.comparison(data)
    assert [c["concurrency"] for c in comp if c["call"] == "call16"] == [16]
    assert len([c for c in comp if c["call"] == "call15"]) == 16
