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
    seen = {(r["policy"], int(r["batch_size"]), r["state"]) for r in rows}
    assert seen == {
        (p, n, s) for p in bench.POLICIES for n in bench.BATCH_SIZES for s in ("on", "off")
    }
    assert all(float(r["us_per_call"]) > 0 for r in rows)
    table = (tmp_path / "hook.md").read_text()
    assert table.count("\n| measure |") == 2 and "batch 128" in table
