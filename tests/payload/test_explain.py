"""payload/explain.py: which decisions the hook explains in its log, and the line it writes."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
from tests.payload.payload_support import hook_config

from sgtrace.payload.calibrated import CalibratedPolicy
from sgtrace.payload.calibration import Calibration, Probe, fold
from sgtrace.payload.explain import decision_line, estimate_line, why_logged
from sgtrace.payload.hook import Hook
from sgtrace.payload.policy import Decision, Observation, PolicyConfig, PolicyKind, Reason
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


def test_a_tails_first_hold_is_explained_with_what_is_left() -> None:
    """A switch the tail cannot repay (payload/tail.py): the hook logs the first such hold of a
    wave with the tail's numbers; the others of the same tail, and a step without one, not."""
    quiet = PolicyState(calibration=Calibration())
    assert why_logged(quiet, quiet, changed=False, tail=True) == "tail"
    assert why_logged(quiet, quiet, changed=True, tail=True) == "switch"
    cal = measured_both()
    for step in range(40, 80):  # both states at 8 requests too: the steps between are read
        cal = fold(cal, step, 8, step < 60, 0.0070 if step < 60 else 0.0037, 16)
    state = PolicyState(
        accept_mean=2.5, calibration=cal, wave_at=0, tail_lengths=tuple(range(64, 80)),
        tail_made=71.0,  # the prefill's token and one a result since
    )  # fmt: skip
    line = decision_line(CONFIG, state, state, 70, 0, 8, False, tail=True)
    assert line is not None and " why=tail " in line
    fields = dict(field.split("=", 1) for field in line.split()[2:])
    assert fields["tail_left"] == "6"  # 74-79: a token a result since step 0, and the lag
    assert float(fields["tail_off"][:-2]) > float(fields["tail_on"][:-2]) > 0
    assert float(fields["switch"][:-2]) > 0
    assert decision_line(CONFIG, state, state, 70, 0, 8, False) is None


def test_the_hook_logs_a_tails_first_hold_only(caplog: pytest.LogCaptureFixture) -> None:
    """The hook logs a tail's hold where the decision before was no tail's (Hook.reason)."""
    hook = Hook(hook_config(PolicyConfig(kind=PolicyKind.CALIBRATED)))
    hook.carrier.post = lambda record: None  # type: ignore[method-assign]
    hook.rank = 0
    cal = measured_both(8)
    state = PolicyState(accept_mean=2.5, calibration=cal, wave_at=0, tail_lengths=(90,) * 8)
    reasons = iter((Reason.TAIL, Reason.TAIL, Reason.STEADY, Reason.TAIL))

    class Held(CalibratedPolicy):
        def decide(self, obs: Observation) -> Decision:
            return Decision(False, False, next(reasons), obs.step, obs.batch_size, 0, 2.5)

    hook.policy = Held(CONFIG, state)
    with caplog.at_level(logging.DEBUG, logger="sgtrace_hook"):
        for step in range(40, 44):
            hook.decide(Observation(step, 8, None, False, 0.0039))
    tails = [r.getMessage() for r in caplog.records if " why=tail " in r.getMessage()]
    assert [line.split()[2] for line in tails] == ["step=40", "step=43"]
