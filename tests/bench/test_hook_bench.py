"""bench/hook_bench.py runs the shipped hook modules and writes its tables (no timing asserted)."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_hook_bench_times_every_policy_state_and_batch_size(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("hook_bench", ROOT / "bench" / "hook_bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--calls", "40", "--repeats", "1", "--out", str(tmp_path)])
    with open(tmp_path / "hook.csv") as f:
        rows = list(csv.DictReader(f))
    seen = {(r["policy"], r["batch_size"], r["state"]) for r in rows}
    assert seen == {
        (p, str(n), s) for p in bench.POLICIES for n in bench.BATCH_SIZES for s in ("on", "off")
    } | {(p, "wave", "on") for p in bench.POLICIES}
    assert all(float(r["us_per_call"]) > 0 for r in rows)
    table = (tmp_path / "hook.md").read_text()
    assert table.count("\n| measure |") == 3 and "batch 128" in table and "spread wave" in table


def test_the_wave_shrinks_from_16_to_2_again_and_again() -> None:
    spec = importlib.util.spec_from_file_location("hook_bench", ROOT / "bench" / "hook_bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    sizes = bench.wave_sizes(240)
    assert sizes[:8] == [16] * 8 and sizes[112:120] == [2] * 8 and sizes[120:] == sizes[:120]
    assert sorted(set(sizes)) == list(range(2, 17))
