"""Warm-up turns (``sweep_load.py --warmup-turns``, ``schedule.warmup_turns``) in the report:
left out of every score and shown on their own."""

from __future__ import annotations

import sys

import pytest
from tests.bench.test_live_sweep import level, script, write_sweep


def test_warm_up_turns_are_left_out_of_the_scores_and_shown_on_their_own(
    tmp_path, capsys, monkeypatch
):
    """A warm-up turn ("warmup": true, sweep_load.py --warmup-turns) is neither in a server's
    rate nor in a paired comparison: EAGLE-3's first turn compiling its kernels at 2000 and
    the hook's first probe at 1500 stay out of the level, and are reported last, alone."""
    report = script("sweep_report")

    def turn(label, rep, rate, warm=False):
        row = {**level(label, 64, [rate]), "rep": rep, "tag": "turns"}
        return {**row, "warmup": True} if warm else row

    lines = [turn("base", 0, 1000.0, True), turn("eagle3-high", 0, 800.0, True)]
    lines += [turn("hook-high", 0, 1500.0, True)]
    lines += [turn(n, rep, r + rep) for rep in (1, 2, 3) for n, r in (("base", 1000.0), ("eagle3-high", 2000.0), ("hook-high", 1990.0))]  # fmt: skip
    write_sweep(tmp_path / "callw", lines)
    rows, _ = report.load([tmp_path / "callw"])
    by = {r["label"]: r for r in rows}
    assert by["eagle3-high"]["tok_per_s"] == pytest.approx(2002.0)
    assert sorted(by["hook-high"]["turns"]) == [("turns", 1), ("turns", 2), ("turns", 3)]
    (one,) = report.comparison(rows)
    assert one["hook_vs_best_pct"] == pytest.approx(100 * (1992 / 2002 - 1), abs=0.05)
    warm, _ = report.load([tmp_path / "callw"], warmup=True)
    (first,) = report.comparison(warm)
    assert (first["hook"], first["eagle3"], first["hook_vs_best_pct"]) == (1500.0, 800.0, 50.0)
    monkeypatch.setattr(sys, "argv", ["p", str(tmp_path / "callw")])
    report.main()
    text = capsys.readouterr().out
    assert text.index("Warm-up turns, not scored") > text.index("| callw | hook | high | 64 |")
    assert "| callw | hook | high | 64 | 1000 | 800 | 1500 | +50.0% |" in text
