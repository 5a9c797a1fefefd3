"""``render_report``: the numbers per step, and the pictures drawn from a recorded trace."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from tracer_support import EXPECTED_CALLS, write_calls

from sgtrace.errors import SgtraceError
from sgtrace.tracer.load import load_trace
from sgtrace.tracer.report import PANELS, StepPoint, render_report, step_series
from sgtrace.tracer.steps import trace_steps

Recorded = Callable[..., Path]
SVG = "{http://www.w3.org/2000/svg}"


def test_step_series_of_a_synthetic_trace(tmp_path: Path) -> None:
    """Calls 1 µs apart (see write_calls): each step's time is to the next step's start."""
    trace = load_trace(write_calls(tmp_path, {0: EXPECTED_CALLS}))
    steps = {c[0]: i for i, c in reversed(list(enumerate(EXPECTED_CALLS)))}  # first call index

    def rate(step: int, tokens: float) -> float:
        return tokens / ((steps[step + 1] - steps[step]) * 1000 / 1e9)

    assert step_series(trace_steps(trace)) == {
        0: [
            StepPoint(2, 2, True, 2.0, 4.0, rate(2, 4.0)),
            StepPoint(3, 2, True, 2.0, 4.0, rate(3, 4.0)),
            StepPoint(4, 8, False, 1.0, 8.0, rate(4, 8.0)),
            StepPoint(5, 8, False, 1.0, 8.0, rate(5, 8.0)),
            StepPoint(6, 2, True, 2.0, 4.0, None),
        ]
    }


def test_svg_report_of_a_recorded_trace_has_every_panel(recorded: Recorded, tmp_path: Path) -> None:
    out = render_report(recorded(), tmp_path / "report.svg")
    root = ET.parse(out).getroot()
    assert root.tag == f"{SVG}svg"
    texts = {"".join(t.itertext()).strip() for t in root.iter(f"{SVG}text")}
    assert set(PANELS) <= texts
    assert {"rank 0", "rank 1", "on", "off"} <= texts


def test_svg_report_is_the_same_for_the_same_trace(recorded: Recorded, tmp_path: Path) -> None:
    first = render_report(recorded(), tmp_path / "a.svg").read_text()
    second = render_report(recorded(), tmp_path / "b.svg").read_text()
    assert first == second


def test_png_and_html_reports(recorded: Recorded, tmp_path: Path) -> None:
    png = render_report(recorded(), tmp_path / "report.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = render_report(recorded(), tmp_path / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "<tr><td>0</td><td>5</td><td>3</td><td>2</td>" in page
    assert "<tr><td>1</td><td>5</td><td>3</td><td>2</td>" in page
    assert page.count("<svg") == 1


def test_unknown_report_format_is_refused(recorded: Recorded, tmp_path: Path) -> None:
    with pytest.raises(SgtraceError, match=r"name it \.svg, \.png or \.html"):
        render_report(recorded(), tmp_path / "report.pdf")
