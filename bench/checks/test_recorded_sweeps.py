"""What the recorded live sweeps conclude, read again by the report scripts of bench/live.

These assert conclusions of recorded data (which server won at which load, what the report
pools), not properties of code: they belong to the benchmark, not to the test suite. Run by
``nox -s bench`` (``python -m pytest bench/checks``); the recordings are under
``bench/results/live/sweep`` and the lab book (``bench/results/LABBOOK.md``) says what each
recorded call was.
"""

from __future__ import annotations

import pytest
from tests.bench.test_live_sweep import SWEEP, script

RUNS = [SWEEP / name for name in ("call1", "call2")]


def test_report_of_the_recorded_sweeps(tmp_path):
    report = script("sweep_report")
    data, greedy = report.load(RUNS)
    labels = {(r["call"], r["label"]) for r in data}
    assert ("call1", "eagle3-high") in labels and ("call2", "hook-high") in labels
    # the synthetic target's greedy continuation is x+1: every server produced exactly that
    summary = report.greedy_summary(greedy)
    assert summary and all(s["expected"] == s["n"] == s["same_as_base"] for s in summary.values())
    # the drafts were built for accept lengths 3.44 and 1.2: SGLang reports what was asked for
    for row in data:
        if row["kind"] == "eagle3":
            want = 3.44 if row["draft"] == "high" else 1.2
            assert row["tokens_per_verify"] == pytest.approx(want, abs=0.06)
    comp = report.comparison(data)
    assert {c["draft"] for c in comp} == {"high", "low"}
    text = report.markdown(data, comp, summary)
    assert "| high | 64 |" in text and "hook vs best" in text
    out = tmp_path / "sweep.svg"
    report.plot(data, out)
    assert out.read_text().lstrip().startswith("<?xml")


def test_report_of_the_decode_kernel_calls():
    """Calls 4-6: the hook's off state per kernel, the tiny pair's outputs, the cold hook."""
    report = script("sweep_report")
    calls = [RUNS[0].parent / name for name in ("call1", "call4", "call5", "call6")]
    data, greedy = report.load(calls)
    ratio = {
        (r["call"], r["label"], r["concurrency"]): r["tok_per_s"] for r in data
    }  # fmt: skip
    for c in (1, 8, 32, 64, 128):  # off on the decode kernel beats off on the split-KV one
        decode = ratio["call5", "hookoff-high", c] / ratio["call5", "base", c]
        split = ratio["call4", "hookoff-high", c] / ratio["call4", "base", c]
        assert decode > split and decode > 0.9
    summary = report.greedy_summary(greedy)
    # tiny random pair: compared with its own no-speculation server, not the synthetic one
    assert (
        summary["call5", "hookoff-tiny"]["same_as_base"]
        > summary["call5", "hookoffup-tiny"]["same_as_base"]
    )
    assert summary["call5", "base-tiny"]["same_as_base"] == 32
    comp = report.comparison(data)
    assert {(c["call"], c["hook_kind"]) for c in comp} >= {("call6", "hookcold"), ("call5", "hook")}
    # call 1 measured adaptive-low under requests of one length: rescaled into call 5, not into
    # call 6, whose request lengths were spread
    low = {(c["call"], c["concurrency"]): c for c in comp if c["draft"] == "low"}
    assert low["call5", 64]["adaptive"] is not None and "call1" in low["call5", 64]["note"]
    assert low["call6", 64]["adaptive"] is None


def test_report_of_the_on_delay_calls(tmp_path):
    """Calls 7-9: a second base server is shown, never compared with; the crossover."""
    report = script("sweep_report")
    calls = [RUNS[0].parent / name for name in ("call7", "call8", "call9")]
    data, _ = report.load(calls)
    replicas = [r for r in data if r.get("replica")]
    assert {(r["call"], r["label"], r["draft"]) for r in replicas} == {
        ("call7", "base-b", ""),
        ("call8", "base-b", ""),
    }
    _, base = report.table(data)
    for r in data:  # the rate every comparison divides by is the base server's own
        if r["kind"] == "base":
            assert (base[r["call"], r["concurrency"]] == r["tok_per_s"]) == (not r.get("replica"))
    comp = report.comparison(data)
    assert {c["draft"] for c in comp} == {"mid", "high", "low"}  # no panel for "b"
    high = {
        c["concurrency"]: c
        for c in comp
        if (c["call"], c["hook_kind"], c["draft"]) == ("call9", "hook", "high")
    }
    # requests of one length: EAGLE-3 wins up to 32 and loses from 64, where the hook is off
    assert all(high[c]["eagle3"] > high[c]["base"] for c in (1, 2, 4, 8, 16, 32))
    assert all(high[c]["eagle3"] < high[c]["base"] for c in (64, 128))
    assert high[128]["hook"] > high[128]["eagle3"] * 1.2
    assert "call8" in high[64]["note"]  # adaptive measured in call 8, rescaled into call 9
    out = tmp_path / "sweep.svg"
    report.plot(data, out)
    text = out.read_text()
    assert text.index("draft 'high'") < text.index("draft 'mid'") < text.index("draft 'low'")


def test_same_work_pairs_measure_the_noise_between_servers():
    """Calls 8-12: a hook speculating throughout against EAGLE-3, a replica against base."""
    report = script("sweep_report")
    calls = [RUNS[0].parent / name for name in ("call8", "call9", "call11", "call12")]
    data, _ = report.load(calls)
    pairs = report.same_work(data)
    seen = {(p["call"], p["server"], p["against"]) for p in pairs}
    assert ("call8", "base-b", "base") in seen
    assert ("call12", "hookcold-high", "eagle3-high") in seen
    by = {(p["call"], p["server"], p["concurrency"]): p for p in pairs}
    # at 64 and 128 the hook is off (about one token per verify): not the same work
    assert not any(key[1].startswith("hook") and key[2] >= 64 for key in by)
    assert all(key[1] != "hookcold-low" for key in by)  # no EAGLE-3 with the low draft there
    rates = {(r["call"], r["label"], r["concurrency"]): r["tok_per_s"] for r in data}
    one = by[("call12", "hookcold-high", 4)]
    want = 100 * (rates[("call12", "hookcold-high", 4)] / rates[("call12", "eagle3-high", 4)] - 1)
    assert one["diff_pct"] == pytest.approx(want, abs=0.05)
    text = report.markdown(data, report.comparison(data), {}, pairs)
    assert (
        "Same work on two servers" in text
        and "| call12 | hookcold-high | eagle3-high | 4 |" in text
    )
    comp = report.comparison(data)
    assert all(
        c["noise_pct"] is not None and c["noise_pct"] > 0 for c in comp if c["call"] == "call12"
    )
