"""bench/trace_scale_bench.py writes traces that validate and its tables (no timing asserted)."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PHASES = ["load", "validate", "merge", "report (load + draw, svg)"]


def test_trace_scale_bench_measures_every_phase_on_traces_that_validate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = ROOT / "bench" / "trace_scale_bench.py"
    spec = importlib.util.spec_from_file_location("trace_scale_bench", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, bench)  # its dataclass looks itself up there
    spec.loader.exec_module(bench)
    bench.main(["--events", "2000", "4000", "--out", str(tmp_path)])  # asserts the verdict OK
    with open(tmp_path / "trace_scale.csv") as f:
        rows = list(csv.DictReader(f))
    # 9 or 11 calls a step (off or on), whole steps only, on each of two ranks
    assert [(r["events"], r["phase"]) for r in rows] == [
        (events, phase) for events in ("1998", "3996") for phase in PHASES
    ]
    table = (tmp_path / "trace_scale.md").read_text().splitlines()
    assert table[6:] == [line for line in table[6:] if line.startswith(("| 1,998 |", "| 3,996 |"))]
    assert table[4] == "| events | " + " | ".join(PHASES) + " |"
