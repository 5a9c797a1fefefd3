"""The rows of an earlier benchmark run, read back from its CSV.

``static_bench.py --only PATTERN`` measures some rows; the others keep the numbers (and load)
of the run that measured them, so that ``static.md`` stays one complete table.
"""

from __future__ import annotations

import csv
from pathlib import Path

from measure import Measurement, Outcome
from report import Row, Target


def previous_rows(results: Path) -> dict[str, Row]:
    """The rows of the last ``static.csv``, to keep those that this run does not measure."""
    path = results / "static.csv"
    if not path.is_file():
        return {}
    rows = {}
    for cells in csv.DictReader(path.read_text().splitlines()):
        measured = cells["status"] != "skipped"
        outcome = next((o for o in Outcome if o.value == cells["status"]), Outcome.FAILED)
        numbers = [float(cells[k] or 0) for k in ("wall s", "cpu s", "peak MiB")]
        measurement = Measurement(
            outcome, *numbers, float(cells["largest process MiB"] or 0), None, ""
        )
        rows[cells["row"]] = Row(
            cells["row"],
            cells["tool"],
            cells["input"],
            cells["cache"],
            _target(cells["target"]),
            measurement if measured else None,
            cells["notes"],
            float(cells["load"]) if cells["load"] else None,
        )
    return rows


def _target(text: str) -> Target | None:
    """A target back from its description (``< 60 s, < 1.5 GiB``)."""
    if not text:
        return None
    parts = [p.strip().removeprefix("< ") for p in text.split(",")]
    wall = float(parts[0].removesuffix(" s"))
    peak = float(parts[1].removesuffix(" GiB")) * 1024 if len(parts) > 1 else None
    return Target(wall, peak)
