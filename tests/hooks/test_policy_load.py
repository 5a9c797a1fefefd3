"""The speculation on/off policy by load: tiers with hysteresis, the on delay, and dwell.

Scenario tests compare the whole list of events (every decision that is not a plain
``steady``) with the expected one."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tests.hooks.policy_support import BATCH_ONLY, assert_rows, drive, events, row

from sgtrace.payload.policies import make_policy
from sgtrace.payload.policy import Decision, Observation, Reason

# --- load tiers with hysteresis ----------------------------------------------------------


def test_hysteresis_band_keeps_the_current_state() -> None:
    batches = [1, 4, 8, 9, 12, 15, 16, 15, 12, 9, 8, 7, 20, 3]
    _, decisions = drive(BATCH_ONLY, batches, start_on=False)
    assert_rows(
        [row(d) for d in decisions],
        """
          0 bs=1   ON  * startup
          1 bs=4   ON    steady
          2 bs=8   ON    steady
          3 bs=9   ON    steady
          4 bs=12  ON    steady
          5 bs=15  ON    steady
          6 bs=16  off * high-load
          7 bs=15  off   steady
          8 bs=12  off   steady
          9 bs=9   off   steady
         10 bs=8   ON  * low-load
         11 bs=7   ON    steady
         12 bs=20  off * high-load
         13 bs=3   ON  * low-load
        """,
    )


@pytest.mark.parametrize(
    ("observed_on", "batch_size", "spec_on", "changed"),
    [
        (False, 1, True, True),
        (True, 1, True, False),
        (True, 20, False, True),
        (False, 20, False, False),
        (True, 12, True, False),
        (False, 12, False, False),
    ],
)
def test_startup_follows_load_and_keeps_the_state_inside_the_band(
    observed_on: bool, batch_size: int, spec_on: bool, changed: bool
) -> None:
    config = replace(BATCH_ONLY, min_dwell_steps=100)
    decision = make_policy(config).decide(Observation(7, batch_size, None, observed_on))
    assert decision == Decision(
        spec_on, changed, Reason.STARTUP, 7, batch_size, 3 if spec_on else 0, None
    )


def test_on_delay_turns_on_only_after_low_load_held_and_off_at_once() -> None:
    config = replace(BATCH_ONLY, on_delay_steps=3)
    batches = [20, 5, 5, 5, 30, 5, 5, 5, 5, 5, 12, 20, 9, 3]
    _, decisions = drive(config, batches, start_on=True)
    assert_rows(
        events(decisions),
        """
          0 bs=20  off * startup
          8 bs=5   ON  * low-load
         11 bs=20  off * high-load
        """,
    )


def test_on_delay_counts_steps_in_a_row_across_toggles() -> None:
    # the low run that starts while on (steps 2-3) counts once off again: no extra wait
    config = replace(BATCH_ONLY, on_delay_steps=2, min_dwell_steps=2)
    _, decisions = drive(config, [4, 20, 4, 4, 4, 4], start_on=True)
    assert_rows(
        events(decisions),
        """
          0 bs=4   ON    startup
          1 bs=20  off * high-load
          4 bs=4   ON  * low-load
        """,
    )


def test_batch_size_zero_counts_as_low_load() -> None:
    _, decisions = drive(BATCH_ONLY, [20, 0], start_on=True)
    assert events(decisions) == ["  0 bs=20  off * startup", "  1 bs=0   ON  * low-load"]


# --- dwell ---------------------------------------------------------------------------------


def test_dwell_holds_toggles_on_until_enough_steps_passed() -> None:
    config = replace(BATCH_ONLY, min_dwell_steps=4)
    _, decisions = drive(config, [2, 20, 2, 2, 2, 2, 10, 2, 2, 20, 10, 2, 2, 2, 2])
    assert_rows(
        [row(d) for d in decisions],
        """
          0 bs=2   ON    startup
          1 bs=20  off * high-load
          2 bs=2   off   dwell-hold
          3 bs=2   off   dwell-hold
          4 bs=2   off   dwell-hold
          5 bs=2   ON  * low-load
          6 bs=10  ON    steady
          7 bs=2   ON    steady
          8 bs=2   ON    steady
          9 bs=20  off * high-load
         10 bs=10  off   steady
         11 bs=2   off   dwell-hold
         12 bs=2   off   dwell-hold
         13 bs=2   ON  * low-load
         14 bs=2   ON    steady
        """,
    )


def test_high_load_turns_off_at_once_even_inside_the_dwell() -> None:
    # a dip turned speculation on; the wave of arrivals after it must not run speculatively
    # for the dwell: off at the first step at off_above (16), on again only after the dwell
    config = replace(BATCH_ONLY, min_dwell_steps=32, on_delay_steps=2)
    _, decisions = drive(config, [64] + [3] * 40 + [12, 23, 64] + [3] * 40, start_on=True)
    assert_rows(
        [row(d) for d in decisions if d.changed],
        """
          0 bs=64  off * startup
         32 bs=3   ON  * low-load
         42 bs=23  off * high-load
         74 bs=3   ON  * low-load
        """,
    )
    assert decisions[41].reason is Reason.STEADY and decisions[41].spec_on  # inside the band
    assert decisions[73].reason is Reason.DWELL_HOLD


def test_startup_toggle_ignores_dwell_and_starts_it() -> None:
    config = replace(BATCH_ONLY, min_dwell_steps=3)
    _, decisions = drive(config, [20, 1, 1, 1, 1], start_on=True)
    assert events(decisions) == [
        "  0 bs=20  off * startup",
        "  1 bs=1   off   dwell-hold",
        "  2 bs=1   off   dwell-hold",
        "  3 bs=1   ON  * low-load",
    ]


def test_dwell_counts_steps_not_calls() -> None:
    config = replace(BATCH_ONLY, min_dwell_steps=10)
    policy = make_policy(config)
    first = policy.decide(Observation(100, 20, None, True))
    held = policy.decide(Observation(109, 1, None, False))
    toggled = policy.decide(Observation(110, 1, None, False))
    assert [first.reason, held.reason, toggled.reason] == [
        Reason.STARTUP,
        Reason.DWELL_HOLD,
        Reason.LOW_LOAD,
    ]
    assert toggled.changed and toggled.spec_on
