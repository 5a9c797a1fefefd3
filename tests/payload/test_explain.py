"""payload/explain.py: which decisions the hook explains in its log, and the line it writes."""

from __future__ import annotations

from dataclasses import replace

from sgtrace.payload.calibration import Calibration, Probe, fold
from sgtrace.payload.explain import decision_line, estimate_line, why_logged
from sgtrace.payload.policy import PolicyConfig
from sgtrace.payload.rules import BucketRates, PolicyState

CONFIG = PolicyConfig()


def measured_both(batch_size: int = 16) -> Calibration:
    cal = Calibration()
    for step in range(20):  # speculation 7.7 ms a step, then the off state 3.9 ms
        cal = fold(cal, step, batch_size, True, 0.0077, CONFIG.window_results)
    for step in range(20, 40):
        cal = fold(cal, step, batch_size, False, 0.0039, CONFIG.window_results)
    return cal


def test_why_a_decision_is_explained() -> None:
    quiet = PolicyState(calibration=Calibration())
    assert why_logged(quiet, quiet, changed=False) is None
    assert why_logged(quiet, quiet, changed=True) == "switch"
    probing = replace(quiet, calibration=Calibration(probe=Probe(False, 3)))
    assert why_logged(probing, quiet, changed=False) == "probe-ended"
    assert why_logged(probing, quiet, changed=True) == "probe-ended"  # its verdict switched
    held = replace(quiet, calibration=Calibration(cohort_until=90, cohort_on=False))
    assert why_logged(quiet, held, changed=False) == "held"
    assert why_logged(held, held, changed=False) is None  # held already: no line a step
    rated = replace(quiet, rates=(BucketRates(16, on=300.0, on_at=1.0),))
    assert why_logged(quiet, rated, changed=False) == "measured"


def test_the_line_says_what_the_policy_compared() -> None:
    state = PolicyState(accept_mean=2.5, calibration=measured_both())
    line = estimate_line(CONFIG, state, 40, 0, 16, "probe-ended")
    fields = dict(field.split("=", 1) for field in line.split()[2:])
    assert (fields["bucket"], fields["why"], fields["accept"]) == ("16", "probe-ended", "2.50")
    assert fields["on"].startswith("7.70ms") and fields["on"].endswith("*")  # its own bucket
    assert fields["off"].startswith("3.90ms")
    assert (
        float(fields["goodput_on"]) == 2.5 / 0.0077 // 0.1 / 10
        or abs(float(fields["goodput_on"]) - 2.5 / 0.0077) < 0.1
    )
    assert abs(float(fields["goodput_off"]) - 1 / 0.0039) < 0.1
    assert fields["margin"].endswith("%")
    alone = estimate_line(CONFIG, state, 40, 0, 32, "switch")  # one bucket: no slope
    assert "on=- off=-" in alone and "goodput" not in alone
    cal = state.calibration
    for step in range(40, 80):  # a second bucket of each state
        cal = fold(cal, step, 8, step < 60, 0.0070 if step < 60 else 0.0037, 16)
    line = estimate_line(CONFIG, replace(state, calibration=cal), 80, 0, 32, "switch")
    fields = dict(field.split("=", 1) for field in line.split()[2:])
    assert fields["on"].endswith("~") and fields["off"].endswith("~")  # read off the others
    assert "goodput_on" in fields


def test_the_measured_policy_keeps_its_own_line_and_only_at_measurements() -> None:
    quiet = PolicyState()
    rated = replace(quiet, rates=(BucketRates(16, on=300.0, on_at=0.0),))
    line = decision_line(CONFIG, quiet, rated, 7, 0, 16, changed=False)
    assert line is not None and line.startswith("sgtrace-hook measured step=7")
    assert decision_line(CONFIG, rated, rated, 8, 0, 16, changed=True) is None
