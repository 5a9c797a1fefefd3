"""When the calibrated policy (:mod:`.calibrated`) holds a state and when it probes the other:
the dwell, the spacing of probes, a probe's start and whether a state is measured in a bucket.

>>> from .policy import PolicyConfig
>>> dwell(PolicyConfig()), spacing(PolicyConfig(), 0), spacing(PolicyConfig(), 2)
(11, 341, 1364)
"""

from __future__ import annotations

import math
from dataclasses import replace

from .calibration import Calibration, Probe
from .goodput import accepts_too_little
from .policy import PolicyConfig, Reason
from .rules import Mode, PolicyState, Proposal

LAG_RESULTS = 3  # a decision on result N runs from result N + 2; N + 2 straddles the switch


def dwell(config: PolicyConfig) -> int:
    """Results a state runs before a measured switch: as many as measuring it takes."""
    return config.min_samples + LAG_RESULTS


def spacing(config: PolicyConfig, failures: int) -> int:
    """Steps from one probe to the next after ``failures`` lost probes in a row.

    A probe runs about :func:`dwell` results; spacing them ``dwell * (1 / probe_share - 1)``
    apart keeps the share of probed results at ``probe_share``.
    """
    base = math.ceil(dwell(config) * (1.0 / config.probe_share - 1.0))
    return int(min(config.max_probe_interval_steps, base * config.probe_backoff**failures))


def start_probe(
    state: PolicyState, proposal: Proposal, probe: Probe
) -> tuple[Proposal, PolicyState]:
    """``proposal`` and ``state`` with ``probe`` running."""
    cal = state.calibration or Calibration()
    return proposal, replace(state, calibration=replace(cal, probe=probe))


def is_measured(config: PolicyConfig, state: PolicyState, spec_on: bool, batch_size: int) -> bool:
    """Whether ``spec_on``'s state holds ``min_samples`` periods in ``batch_size``'s bucket."""
    window = (state.calibration or Calibration()).window_of(spec_on, batch_size)
    return window is not None and window.count >= config.min_samples


def gate_verdict(
    config: PolicyConfig, state: PolicyState, step: int
) -> tuple[Proposal, PolicyState]:
    """An acceptance probe's end at ``step``: the gate opens where the accept length of the
    verifies it saw clears the breakeven by the switching margin; else the draft is held off
    again, the next probe a spacing later, the spacing doubled by each failure in a row."""
    cal = state.calibration or Calibration()
    ended = replace(cal, probe=None, probe_free_at=step + spacing(config, 0))
    if state.accept_samples >= 1 and not accepts_too_little(config, state, 1, margin=True):
        return Proposal(True, Reason.PROBE_PASSED, Mode.NORMAL, 0), replace(
            state, calibration=ended
        )
    failed = state.failed_probes
    failed = failed + 1 if spacing(config, failed) < config.max_probe_interval_steps else failed
    ended = replace(ended, gate_free_at=step + spacing(config, failed))
    off = Proposal(False, Reason.LOW_ACCEPTANCE, Mode.HELD_OFF, failed)
    return off, replace(state, calibration=ended)


__all__ = ["LAG_RESULTS", "dwell", "gate_verdict", "is_measured", "spacing", "start_probe"]
