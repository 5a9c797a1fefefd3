"""The speculation on/off policy's acceptance gate, and its probes with back-off while off.

Scenario tests compare the whole list of events (every decision that is not a plain
``steady``) with the expected one."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tests.hooks.policy_support import BATCH_ONLY, GATED, assert_rows, drive, events

from sgtrace.payload.policies import make_policy, replay
from sgtrace.payload.policy import Observation, Reason, Tier
from sgtrace.payload.rules import Mode

# --- acceptance gate -----------------------------------------------------------------------


def test_draft_that_accepts_nothing_is_turned_off_even_at_batch_size_one() -> None:
    _, decisions = drive(GATED, [1] * 6)
    assert events(decisions) == ["  0 bs=1   ON    startup", "  3 bs=1   off * low-acceptance"]
    assert decisions[3].accept_mean == 1.0


def test_batch_size_preset_has_no_acceptance_gate() -> None:
    _, decisions = drive(BATCH_ONLY, [1] * 50)
    assert events(decisions) == ["  0 bs=1   ON    startup"]
    assert decisions[-1].accept_mean == 1.0


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (1.5, ["  0 bs=2   ON    startup"]),  # exactly the breakeven: still pays
        (1.4375, ["  0 bs=2   ON    startup", "  3 bs=2   off * low-acceptance"]),
    ],
)
def test_gate_compares_with_the_goodput_breakeven(accept: float, expected: list[str]) -> None:
    config = replace(GATED, draft_cost_ratio=0.25, num_steps=2)  # 1 + 0.25 * 2 = 1.5
    assert config.breakeven_accept_length(2) == 1.5
    _, decisions = drive(config, [2] * 8, accept=lambda step: accept)
    assert events(decisions) == expected


def test_explicit_min_accept_length_replaces_the_breakeven() -> None:
    config = replace(GATED, min_accept_length=2.5)
    assert config.breakeven_accept_length(3) == 2.5
    _, decisions = drive(config, [2] * 5, accept=lambda step: 2.25)
    assert events(decisions) == ["  0 bs=2   ON    startup", "  3 bs=2   off * low-acceptance"]


def test_accept_mean_is_an_exponential_mean_of_batch_means() -> None:
    config = replace(GATED, min_accept_samples=100)
    observations = [
        Observation(0, 1, None, True),
        Observation(1, 1, (2.0,), True),
        Observation(2, 2, (1.0, 1.0), True),
        Observation(3, 1, (1.0,), True),
        Observation(4, 3, (1.0, 2.0, 4.0), True),
        Observation(5, 3, None, True),
    ]
    means = [d.accept_mean for d in replay(config, observations)]
    assert means == [None, 2.0, 1.5, 1.25, 1.25 + 0.5 * (7.0 / 3.0 - 1.25), means[4]]


def test_accept_lengths_while_off_are_ignored() -> None:
    policy = make_policy(replace(BATCH_ONLY, min_dwell_steps=100))
    policy.decide(Observation(0, 20, None, False))
    decision = policy.decide(Observation(1, 20, (1.0, 1.0), False))
    assert decision.accept_mean is None and policy.state.accept_samples == 0


def test_acceptance_is_measured_afresh_after_every_toggle() -> None:
    # On at 0, off for load at 2 (2 samples so far), on at 3: three new samples needed.
    _, decisions = drive(GATED, [2, 2, 20, 2, 2, 2, 2, 2])
    assert events(decisions) == [
        "  0 bs=2   ON    startup",
        "  2 bs=20  off * high-load",
        "  3 bs=2   ON  * low-load",
        "  6 bs=2   off * low-acceptance",
    ]


def test_low_acceptance_waits_for_the_dwell() -> None:
    config = replace(GATED, min_dwell_steps=5)
    _, decisions = drive(config, [2] * 7, start_on=False)
    assert events(decisions) == [
        "  0 bs=2   ON  * startup",
        "  3 bs=2   ON    dwell-hold",
        "  4 bs=2   ON    dwell-hold",
        "  5 bs=2   off * low-acceptance",
    ]


def test_tiers_set_steps_and_the_breakeven_per_batch_size() -> None:
    config = replace(GATED, tiers=(Tier(4, 1),))  # 1.1 from batch size 4, 1.3 below
    assert [config.steps_for(b) for b in (0, 3, 4, 64)] == [3, 3, 1, 1]
    _, at_four = drive(config, [4] * 6, accept=lambda step: 1.2)
    _, at_two = drive(config, [2] * 6, accept=lambda step: 1.2)
    assert events(at_four) == ["  0 bs=4   ON    startup"]
    assert [d.num_steps for d in at_four] == [1] * 6
    assert events(at_two) == ["  0 bs=2   ON    startup", "  3 bs=2   off * low-acceptance"]
    assert [d.num_steps for d in at_two] == [3, 3, 3, 0, 0, 0]


# --- probes and back-off -------------------------------------------------------------------


def test_failed_probes_back_off_by_doubling_up_to_the_cap() -> None:
    _, decisions = drive(GATED, [2] * 125)
    assert_rows(
        events(decisions),
        """
          0 bs=2   ON    startup
          3 bs=2   off * low-acceptance
         13 bs=2   ON  * probe
         15 bs=2   off * low-acceptance
         35 bs=2   ON  * probe
         37 bs=2   off * low-acceptance
         77 bs=2   ON  * probe
         79 bs=2   off * low-acceptance
        119 bs=2   ON  * probe
        121 bs=2   off * low-acceptance
        """,
    )
    assert [GATED.probe_interval(n) for n in range(4)] == [10, 20, 40, 40]


def test_a_failed_probe_ends_without_waiting_for_the_dwell() -> None:
    config = replace(GATED, min_dwell_steps=6)
    _, decisions = drive(config, [2] * 22, start_on=False)
    assert_rows(
        events(decisions),
        """
          0 bs=2   ON  * startup
          3 bs=2   ON    dwell-hold
          4 bs=2   ON    dwell-hold
          5 bs=2   ON    dwell-hold
          6 bs=2   off * low-acceptance
         16 bs=2   ON  * probe
         18 bs=2   off * low-acceptance
        """,
    )


def test_passed_probe_keeps_speculation_on_and_resets_the_back_off() -> None:
    _, decisions = drive(GATED, [2] * 88, accept=lambda step: 2.0 if 30 <= step < 50 else 1.0)
    assert_rows(
        events(decisions),
        """
          0 bs=2   ON    startup
          3 bs=2   off * low-acceptance
         13 bs=2   ON  * probe
         15 bs=2   off * low-acceptance
         35 bs=2   ON  * probe
         37 bs=2   ON    probe-passed
         52 bs=2   off * low-acceptance
         62 bs=2   ON  * probe
         64 bs=2   off * low-acceptance
         84 bs=2   ON  * probe
         86 bs=2   off * low-acceptance
        """,
    )


def test_probe_waits_for_low_load_and_low_load_alone_does_not_reenable() -> None:
    batches = [2] * 5 + [12] * 16 + [2] * 4
    _, decisions = drive(GATED, batches)
    assert events(decisions) == [
        "  0 bs=2   ON    startup",
        "  3 bs=2   off * low-acceptance",
        " 21 bs=2   ON  * probe",
        " 23 bs=2   off * low-acceptance",
    ]
    assert decisions[4].reason is Reason.STEADY and not decisions[4].spec_on


def test_high_load_during_a_probe_ends_it_without_back_off() -> None:
    batches = [2] * 14 + [20] + [2] * 15
    _, decisions = drive(GATED, batches)
    assert events(decisions) == [
        "  0 bs=2   ON    startup",
        "  3 bs=2   off * low-acceptance",
        " 13 bs=2   ON  * probe",
        " 14 bs=20  off * high-load",
        " 24 bs=2   ON  * probe",
        " 26 bs=2   off * low-acceptance",
    ]


def test_policy_state_tracks_mode_and_failures() -> None:
    config = GATED
    policy = make_policy(config)
    spec_on, lengths, modes = True, None, []
    for step in range(16):
        decision = policy.decide(Observation(step, 2, lengths, spec_on))
        spec_on, lengths = decision.spec_on, (1.0, 1.0) if decision.spec_on else None
        modes.append((policy.state.mode, policy.state.failed_probes))
    assert modes[2] == (Mode.NORMAL, 0)
    assert modes[3] == (Mode.HELD_OFF, 0)
    assert modes[13] == (Mode.PROBING, 0)
    assert modes[15] == (Mode.HELD_OFF, 1)
