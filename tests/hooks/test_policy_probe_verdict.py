"""A probe's verdict: the state to run now is the better at the batch size now; whether the
probe lost, and so how long until the next probe there, is the verdict at the batch size it
measured (a wave's tail shrinks the batch while a probe runs)."""

from __future__ import annotations

from dataclasses import replace

from sgtrace.payload.calibrated import CalibratedPolicy, spacing
from sgtrace.payload.calibration import Calibration, Probe
from sgtrace.payload.policy import Observation, PolicyConfig, PolicyKind, Reason
from sgtrace.payload.rules import Mode, PolicyState
from sgtrace.payload.window import window_of_periods

CALIBRATED = PolicyConfig(kind=PolicyKind.CALIBRATED)


def seconds(batch_size: int, spec_on: bool) -> float:
    """A toy machine: with accept length 2.5 speculation pays below 37 requests."""
    return 0.006 + 0.0003 * batch_size if spec_on else 0.005 + 0.00005 * batch_size


def probing(size: int) -> PolicyState:
    """Off, both states measured at 8 and 64, a probe of speculation started at ``size``
    requests and measured enough to end."""
    windows = tuple(
        window_of_periods(on, b, (seconds(b, on),) * 8, (b,) * 8, 0)
        for on in (False, True)
        for b in (8, 64)
    )
    probe = Probe(True, 90, samples=8, batch_size=size)
    cal = Calibration(windows=windows, last_ran_on=True, run=9, probe=probe)
    return PolicyState(
        mode=Mode.PROBING, last_step=99, last_toggle_step=90, accept_mean=2.5, accept_samples=40,
        calibration=cal,
    )  # fmt: skip


def test_a_probe_that_lost_where_it_started_counts_there_though_the_batch_shrank() -> None:
    """Speculation probed at 64, where it loses; the wave's tail leaves 8 requests, where it
    wins: it stays on for them, and the probe counts as lost at 64 (the next one there waits
    twice as long), not as won at 8."""
    state, decision = CalibratedPolicy(CALIBRATED).advance(
        probing(64), Observation(100, 8, (2.5,) * 8, True, 0.008)
    )
    assert (decision.spec_on, decision.reason) == (True, Reason.MEASURED)
    cal = state.calibration
    assert cal is not None and cal.probe is None
    assert (cal.failures_at(64), cal.failures_at(8)) == (1, 0)
    assert spacing(CALIBRATED, cal.failures_at(64)) == 2 * spacing(CALIBRATED, 0)


def test_a_probe_judged_where_it_started_when_the_batch_kept_its_size() -> None:
    state, decision = CalibratedPolicy(CALIBRATED).advance(
        probing(64), Observation(100, 64, (2.5,) * 64, True, 0.03)
    )
    assert (decision.spec_on, decision.changed, decision.reason) == (False, True, Reason.MEASURED)
    assert state.calibration is not None and state.calibration.failures_at(64) == 1
    # a probe recorded before probes knew their batch size is judged at the batch size now
    old = probing(64)
    cal = old.calibration
    assert cal is not None and cal.probe is not None
    old = replace(old, calibration=replace(cal, probe=replace(cal.probe, batch_size=0)))
    state, _ = CalibratedPolicy(CALIBRATED).advance(
        old, Observation(100, 8, (2.5,) * 8, True, 0.008)
    )
    assert state.calibration is not None and state.calibration.failures_at(64) == 0
