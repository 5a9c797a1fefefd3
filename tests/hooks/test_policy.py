"""The speculation on/off policy: load hysteresis, dwell, acceptance gate, probes, replay.

Scenario tests drive a :class:`Policy` the way the hook does (the next observation carries the
decision's state and the accept lengths of the verify that ran) and compare the whole list of
events (every decision that is not a plain ``steady``) with the expected one.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

import sgtrace.payload
from sgtrace.payload.measured import MAX_BLOCK_SAMPLE, bucket_of
from sgtrace.payload.policies import make_policy, policy_from_dict, replay
from sgtrace.payload.policy import (
    CONFIG_KEYS,
    PRESETS,
    Decision,
    Observation,
    PolicyConfig,
    Reason,
    Tier,
)
from sgtrace.payload.rules import Mode, PolicyState

BATCH_ONLY = PolicyConfig(preset="batch-size", acceptance_gate=False, min_dwell_steps=0)
# Breakeven 1 + 0.1 * 3 = 1.3; small numbers so scenarios stay short.
GATED = PolicyConfig(
    min_dwell_steps=0,
    accept_ema_alpha=0.5,
    min_accept_samples=3,
    probe_interval_steps=10,
    probe_steps=2,
    probe_backoff=2,
    max_probe_interval_steps=40,
)


def drive(
    config: PolicyConfig,
    batch_sizes: Sequence[int],
    accept: Callable[[int], float] = lambda step: 1.0,
    start_on: bool = True,
) -> tuple[list[Observation], list[Decision]]:
    """Run the policy as the hook would, one step per batch size.

    The observation of step ``k`` says whether speculation is on (the decision of ``k - 1``)
    and carries the accept lengths of the verify that ran in step ``k - 1``:
    ``accept(k - 1)`` for every request of that batch.
    """
    policy = make_policy(config)
    spec_on, lengths = start_on, None
    observations: list[Observation] = []
    decisions: list[Decision] = []
    for step, batch_size in enumerate(batch_sizes):
        obs = Observation(step, batch_size, lengths, spec_on)
        decision = policy.decide(obs)
        observations.append(obs)
        decisions.append(decision)
        spec_on = decision.spec_on
        lengths = (accept(step),) * batch_size if spec_on and batch_size else None
    return observations, decisions


def row(decision: Decision) -> str:
    """``step bs=N ON|off [*] reason``; ``*`` marks a toggle."""
    state = "ON " if decision.spec_on else "off"
    mark = "*" if decision.changed else " "
    return f"{decision.step:3} bs={decision.batch_size:<3} {state} {mark} {decision.reason.value}"


def events(decisions: Sequence[Decision]) -> list[str]:
    """The rows of every decision that is not a plain ``steady``."""
    return [row(d) for d in decisions if d.reason is not Reason.STEADY]


def assert_rows(actual: list[str], expected: str) -> None:
    """Compare whole row lists (ignoring leading blanks); on failure print both."""
    wanted = [line.strip() for line in expected.strip().splitlines()]
    actual = [line.strip() for line in actual]
    assert actual == wanted, "expected:\n" + "\n".join(wanted) + "\nactual:\n" + "\n".join(actual)


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


# --- determinism and replay ----------------------------------------------------------------


def random_run(
    config: PolicyConfig, seed: int, length: int = 400
) -> tuple[list[Observation], list[Decision]]:
    """A random load (random walk of batch sizes, gaps between steps, random accept lengths)."""
    rng = random.Random(seed)
    policy = make_policy(config)
    step, batch_size, spec_on, lengths = 0, rng.randint(0, 30), rng.random() < 0.5, None
    observations: list[Observation] = []
    decisions: list[Decision] = []
    for _ in range(length):
        obs = Observation(step, batch_size, lengths, spec_on)
        decision = policy.decide(obs)
        observations.append(obs)
        decisions.append(decision)
        spec_on = decision.spec_on
        good = rng.random() < 0.5
        pool = (1.0, 2.0, 3.0, 4.0) if good else (1.0, 1.0, 1.0, 1.5)
        lengths = tuple(rng.choice(pool) for _ in range(batch_size)) if spec_on else None
        step += rng.randint(1, 3)
        batch_size = max(0, min(40, batch_size + rng.randint(-4, 4)))
    return observations, decisions


RANDOM_CONFIGS = [
    replace(GATED, min_dwell_steps=12, min_accept_samples=5, probe_steps=3),
    replace(BATCH_ONLY, min_dwell_steps=6),
    replace(GATED, on_below=4, off_above=24, min_dwell_steps=0, tiers=(Tier(2, 2), Tier(8, 1))),
    replace(BATCH_ONLY, on_below=12, off_above=16, on_delay_steps=3),
]


@pytest.mark.parametrize("config", RANDOM_CONFIGS)
def test_same_inputs_give_the_same_decisions_and_replay_matches(config: PolicyConfig) -> None:
    for seed in range(20):
        observations, live = random_run(config, seed)
        assert random_run(config, seed)[1] == live
        assert replay(config, observations) == live
        recorded = json.loads(json.dumps([obs.to_dict() for obs in observations]))
        assert replay(config, [Observation.from_dict(o) for o in recorded]) == live
        written = json.loads(json.dumps([d.to_dict() for d in live]))
        assert [Decision.from_dict(d) for d in written] == live


@pytest.mark.parametrize("config", RANDOM_CONFIGS)
def test_resuming_from_a_serialised_state_changes_nothing(config: PolicyConfig) -> None:
    observations, live = random_run(config, seed=7)
    policy = make_policy(config)
    for obs in observations[:150]:
        policy.decide(obs)
    saved = json.loads(json.dumps(policy.state.to_dict()))
    resumed = make_policy(config, PolicyState.from_dict(saved))
    assert resumed.state == policy.state
    assert [resumed.decide(obs) for obs in observations[150:]] == live[150:]


@pytest.mark.parametrize("config", RANDOM_CONFIGS)
def test_invariants_hold_over_random_loads(config: PolicyConfig) -> None:
    reasons: set[Reason] = set()
    for seed in range(30):
        observations, decisions = random_run(config, seed)
        reasons.update(d.reason for d in decisions)
        toggles = [d for d in decisions if d.changed]
        for a, b in zip(toggles, toggles[1:], strict=False):
            # only toggles off end the dwell early: a failed probe, or high load
            probe_ended = (a.reason, b.reason) == (Reason.PROBE, Reason.LOW_ACCEPTANCE)
            high_load = not b.spec_on and b.batch_size >= config.off_above
            assert b.step - a.step >= config.min_dwell_steps or probe_ended or high_load
            if b.spec_on:
                assert b.step - a.step >= config.min_dwell_steps
        low_run = 0
        for obs, d in zip(observations, decisions, strict=True):
            low_run = low_run + 1 if obs.batch_size <= config.on_below else 0
            if d.reason is Reason.LOW_LOAD:
                assert low_run > config.on_delay_steps
            assert (d.step, d.batch_size) == (obs.step, obs.batch_size)
            assert d.changed == (d.spec_on != obs.spec_on)
            assert (d.num_steps == 0) == (not d.spec_on)
            assert not (d.spec_on and obs.batch_size >= config.off_above)  # off at once
            if d.reason is Reason.LOW_ACCEPTANCE:
                breakeven = config.breakeven_accept_length(config.steps_for(obs.batch_size))
                assert d.accept_mean is not None and d.accept_mean < breakeven
            if not config.acceptance_gate and low_run > config.on_delay_steps:
                assert d.spec_on or d.reason is Reason.DWELL_HOLD
    gate_reasons = {Reason.LOW_ACCEPTANCE, Reason.PROBE, Reason.PROBE_PASSED}
    load_reasons = {Reason.STARTUP, Reason.STEADY, Reason.LOW_LOAD, Reason.HIGH_LOAD}
    dwell = {Reason.DWELL_HOLD} if config.min_dwell_steps else set()
    # The random loads reach every rule the config has, so the checks above mean something.
    assert reasons == load_reasons | dwell | (gate_reasons if config.acceptance_gate else set())


def test_advance_is_pure() -> None:
    state = PolicyState(Mode.PROBING, 10, 10, 1.5, 1, 2)
    obs = Observation(11, 2, (1.0, 1.0), True)
    policy = make_policy(GATED)
    first = policy.advance(state, obs)
    assert policy.advance(state, obs) == first
    assert state == PolicyState(Mode.PROBING, 10, 10, 1.5, 1, 2)


POLICY_RUNNER = """\
import importlib.util, json, sys
try:
    import sgtrace  # noqa: F401
    has_sgtrace = True
except ImportError:
    has_sgtrace = False
sys.path.insert(0, sys.argv[1])
from sgtrace_payload.policies import policy_from_dict
from sgtrace_payload.policy import Observation
with open(sys.argv[2]) as fh:
    config = json.load(fh)
with open(sys.argv[3]) as fh:
    observations = [Observation.from_dict(o) for o in json.load(fh)]
policy = policy_from_dict(config)
print(json.dumps({"has_sgtrace": has_sgtrace,
                  "decisions": [policy.decide(o).to_dict() for o in observations]}))
"""


def test_policy_module_runs_alone_without_sgtrace(tmp_path: Path) -> None:
    """Copied into a hook directory as the payload package, it runs where sgtrace is not
    installed, with equal results."""
    config = RANDOM_CONFIGS[0]
    observations, live = random_run(config, seed=3)
    shutil.copytree(Path(sgtrace.payload.__file__).parent, tmp_path / "sgtrace_payload")
    (tmp_path / "config.json").write_text(config.to_json())
    (tmp_path / "obs.json").write_text(json.dumps([o.to_dict() for o in observations]))
    (tmp_path / "run.py").write_text(POLICY_RUNNER)
    done = subprocess.run(
        [sys.executable, "-I", "-S", "run.py", str(tmp_path), "config.json", "obs.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["has_sgtrace"] is False
    assert [Decision.from_dict(d) for d in result["decisions"]] == live


# --- bad input ------------------------------------------------------------------------------


def test_step_going_back_is_an_error() -> None:
    policy = make_policy(BATCH_ONLY)
    policy.decide(Observation(5, 1, None, True))
    with pytest.raises(ValueError) as info:
        policy.decide(Observation(4, 1, None, True))
    assert str(info.value) == (
        "step went back from 5 to 4: "
        "Observation(step=4, batch_size=1, accept_lengths=None, spec_on=True, step_period_s=None)"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"step": -1, "batch_size": 1, "accept_lengths": None, "spec_on": True},
            "step and batch_size must be integers >= 0: "
            "Observation(step=-1, batch_size=1, accept_lengths=None, spec_on=True, step_period_s=None)",
        ),
        (
            {"step": 0, "batch_size": 1.0, "accept_lengths": None, "spec_on": True},
            "step and batch_size must be integers >= 0: "
            "Observation(step=0, batch_size=1.0, accept_lengths=None, spec_on=True, step_period_s=None)",
        ),
        (
            {"step": 0, "batch_size": 1, "accept_lengths": (0.0,), "spec_on": True},
            "accept lengths must be numbers >= 1.0 (bonus token included): "
            "Observation(step=0, batch_size=1, accept_lengths=(0.0,), spec_on=True, step_period_s=None)",
        ),
        (
            {"step": 0, "batch_size": 1, "accept_lengths": (float("nan"),), "spec_on": True},
            "accept lengths must be numbers >= 1.0 (bonus token included): "
            "Observation(step=0, batch_size=1, accept_lengths=(nan,), spec_on=True, step_period_s=None)",
        ),
    ],
)
def test_bad_observations_are_rejected(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as info:
        Observation(**kwargs)
    assert str(info.value) == message


def test_from_dict_rejects_unknown_keys_and_presets() -> None:
    keys = ", ".join(CONFIG_KEYS)
    with pytest.raises(ValueError) as info:
        PolicyConfig.from_dict({"on_belw": 3, "preset": "fast"})
    assert str(info.value) == (
        f"unknown policy keys ['on_belw'] or preset 'fast'; keys are {keys} "
        "and presets batch-size, default"
    )


# --- config values -------------------------------------------------------------------------


def test_config_json_round_trip() -> None:
    configs = [
        PolicyConfig(),
        PolicyConfig(preset="batch-size", acceptance_gate=False),
        replace(GATED, min_accept_length=1.75, tiers=(Tier(1, 3), Tier(16, 1))),
    ]
    for config in configs:
        assert PolicyConfig.from_dict(json.loads(config.to_json())) == config
        assert policy_from_dict(json.loads(config.to_json())).config == config


def test_config_json_text() -> None:
    assert PolicyConfig(tiers=(Tier(1, 3),)).to_json() == textwrap.dedent(
        """\
        {
          "accept_ema_alpha": 0.125,
          "acceptance_gate": true,
          "draft_cost_ratio": 0.1,
          "max_probe_interval_steps": 8192,
          "measure": false,
          "measure_margin": 0.03,
          "measure_s": 0.25,
          "measure_steps": 8,
          "min_accept_length": null,
          "min_accept_samples": 32,
          "min_dwell_steps": 32,
          "num_steps": 3,
          "off_above": 16,
          "on_below": 8,
          "on_delay_steps": 0,
          "preset": "default",
          "probe_backoff": 2,
          "probe_interval_steps": 512,
          "probe_steps": 32,
          "remeasure_s": 30.0,
          "tiers": [
            {
              "min_batch_size": 1,
              "num_steps": 3
            }
          ]
        }
        """
    )


def test_presets_and_partial_dicts() -> None:
    assert sorted(PRESETS) == ["batch-size", "default"]
    assert PolicyConfig.from_dict({}) == PolicyConfig()
    assert PolicyConfig.from_dict({"preset": "batch-size"}) == PolicyConfig(
        preset="batch-size", acceptance_gate=False
    )
    assert PolicyConfig.from_dict({"draft_cost_ratio": 1, "min_accept_length": 2}) == (
        PolicyConfig(draft_cost_ratio=1.0, min_accept_length=2.0)
    )
    assert isinstance(PolicyConfig.from_dict({"draft_cost_ratio": 1}).draft_cost_ratio, float)


def test_probe_interval_without_back_off_stays_put() -> None:
    config = replace(GATED, probe_backoff=1)
    assert [config.probe_interval(n) for n in range(3)] == [10, 10, 10]


def _timed_run(config: PolicyConfig, phases, period_of) -> list[Decision]:
    """Feed ``config`` a run of ``(batch_size, steps)`` phases whose step periods come from
    ``period_of(step, batch_size, spec_on)``; speculation accepts 3 tokens a verify."""
    policy, spec_on, step, out = make_policy(config), True, 0, []
    for size, steps in phases:
        for _ in range(steps):
            lengths = (3.0,) * size if spec_on else None
            decision = policy.decide(
                Observation(step, size, lengths, spec_on, period_of(step, size, spec_on))
            )
            out.append(decision)
            spec_on, step = decision.spec_on, step + 1
    return out


def test_measure_keeps_the_state_within_the_margin_and_remeasures_the_other() -> None:
    # speculation 3 tokens in 2.95 ms against 1 token in 1 ms: 1.7% better, inside a 3% margin
    config = PolicyConfig(measure=True, measure_steps=4, measure_s=0.0, remeasure_s=0.1)
    decisions = _timed_run(config, [(1, 300)], lambda _s, _b, on: 0.00295 if on else 0.001)
    toggles = [(d.step, d.spec_on, d.reason.value) for d in decisions if d.changed]
    # on measured (steps 0-3), off explored (settled 2 steps, then 4 a measurement): stays off
    # within the margin; at the first measurement 0.1 s of decoding (100 off steps) after the on
    # one, on is measured again (and kept, within the margin), and 0.1 s (34 on steps) later
    # off again
    assert toggles[:3] == [(3, False, "explore"), (105, True, "explore"), (139, False, "explore")]
    assert {d.reason.value for d in decisions} <= {"startup", "steady", "explore"}


def test_a_measurement_is_the_median_of_its_results_and_idle_gaps_do_not_count() -> None:
    # plain decoding: 1 ms a step, but every 8th step 30 ms (the host streamed responses);
    # speculation: 3 tokens a verify in 4 ms; a 5 s idle gap at step 50. By the mean of a
    # block (8 tokens a request in 37 ms: 216 a second) speculation (750) would win; by the
    # steps' own cost plain decoding (1000) does
    config = PolicyConfig(measure=True, measure_steps=8, measure_s=0.05, remeasure_s=1000.0)

    def period(step: int, _size: int, on: bool) -> float:
        if step == 50:
            return 5.0
        return 0.004 if on else (0.03 if step % 8 == 0 else 0.001)

    policy, spec_on = make_policy(config), True
    for step in range(200):
        lengths = (3.0,) * 4 if spec_on else None
        decision = policy.decide(Observation(step, 4, lengths, spec_on, period(step, 4, spec_on)))
        spec_on = decision.spec_on
    (rates, *others) = policy.state.rates
    assert (rates.bucket, others) == (4, [])
    assert rates.on == pytest.approx(3.0 / 0.004)
    assert rates.off == pytest.approx(1 / 0.001)
    assert not spec_on
    state = policy.state
    assert state.clock_s < 1.0  # the idle gap is not decoding time
    # the state round-trips through JSON, measurements and the block in progress included
    assert state.block is not None and len(state.block.goodputs) == state.block.results > 1
    assert PolicyState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


def test_batch_sizes_measure_by_power_of_two_buckets() -> None:
    sizes = (0, 1, 2, 3, 4, 5, 8, 9, 64, 65, 128)
    assert [bucket_of(n) for n in sizes] == [1, 1, 2, 4, 4, 8, 8, 16, 64, 128, 128]


def test_measure_counts_speculation_at_its_accept_length_away_from_toggles() -> None:
    # speculation: 4 requests, 2 ms a step, 3.4 tokens a verify once warm (6800 tokens/s);
    # plain decoding 1 ms a step (4000 tokens/s). For 100 steps after speculation turns back
    # on the requests that decoded while off accept 1.5 (3000 tokens/s): measured as it ran,
    # speculation would lose right after every exploration of the off state and stay off
    config = PolicyConfig(measure=True, measure_steps=8, measure_s=0.0, remeasure_s=0.5)
    policy, spec_on, toggled_on, states, toggles = make_policy(config), True, None, [], []
    for step in range(3000):
        cold = toggled_on is not None and step - toggled_on < 100
        lengths = ((1.5 if cold else 3.4),) * 4 if spec_on else None
        period = 0.002 if spec_on else 0.001
        decision = policy.decide(Observation(step, 4, lengths, spec_on, period))
        if decision.changed:
            toggles.append((decision.spec_on, decision.reason.value))
            toggled_on = step if decision.spec_on else toggled_on
        spec_on = decision.spec_on
        states.append(spec_on)
    assert policy.state.warm_accept == pytest.approx(3.4)
    # every exploration of the off state ends back on, measured, and cold spells do not count
    assert toggles[:4] == [(False, "explore"), (True, "measured")] * 2
    assert set(toggles) == {(False, "explore"), (True, "measured")}
    assert sum(states) / len(states) > 0.95


def test_measure_never_chooses_a_draft_below_the_breakeven_but_keeps_exploring_it() -> None:
    # the periods say speculation wins (4 requests at 1.1 tokens a verify in 1 ms, against 1
    # token in 1.2 ms: 4400 against 3333 tokens/s), but 1.1 is below the breakeven (1.3): the
    # gate only lets it be explored; without the gate the measurement decides
    def run(gate: bool) -> tuple[list[tuple[bool, str]], float]:
        config = PolicyConfig(
            measure=True, measure_steps=8, measure_s=0.0, remeasure_s=0.05, acceptance_gate=gate
        )
        policy, spec_on, toggles, on_steps = make_policy(config), True, [], 0
        for step in range(600):
            lengths = (1.1,) * 4 if spec_on else None
            obs = Observation(step, 4, lengths, spec_on, 0.001 if spec_on else 0.0012)
            decision = policy.decide(obs)
            if decision.changed:
                toggles.append((decision.spec_on, decision.reason.value))
            spec_on = decision.spec_on
            on_steps += spec_on
        return toggles, on_steps / 600

    toggles, on_share = run(gate=False)
    assert toggles[:2] == [(False, "explore"), (True, "measured")] and on_share > 0.75
    toggles, on_share = run(gate=True)
    # off once its first measurement completes, then on for one measurement (8 results and 2
    # settling) every 0.05 s of decoding (~50 steps)
    assert toggles[:3] == [(False, "low-acceptance"), (True, "explore"), (False, "low-acceptance")]
    assert set(toggles) == {(True, "explore"), (False, "low-acceptance")}
    assert 0.1 < on_share < 0.3


def test_measure_compares_the_states_per_request_whatever_the_batch_size_in_the_bucket() -> None:
    # speculation measured at 64 requests (3 tokens in 20 ms: 150 tokens/s a request, 9600 for
    # the batch), plain decoding then at 34 of the same bucket (1 token in 5 ms: 200 a request,
    # 6800 for the batch): per request plain decoding is the better, and stays
    config = PolicyConfig(
        on_below=64, off_above=128, measure=True, measure_steps=4, measure_s=0.0, remeasure_s=1.0
    )
    decisions = _timed_run(config, [(64, 4), (34, 40)], lambda _s, _b, on: 0.02 if on else 0.005)
    toggles = [(d.step, d.spec_on, d.reason.value) for d in decisions if d.changed]
    assert toggles == [(3, False, "explore")]


def test_a_block_of_many_fast_results_keeps_a_bounded_sample() -> None:
    # 0.1 ms steps (every 10th 1 ms) for a 0.5 s block: thousands of results, a sample of them
    # kept, and the median still that of the whole block
    config = PolicyConfig(measure=True, measure_steps=8, measure_s=0.5, remeasure_s=1000.0)
    policy, longest = make_policy(config), 0
    for step in range(6000):
        period = 0.001 if step % 10 == 0 else 0.0001
        policy.decide(Observation(step, 4, None, False, period))
        if policy.state.block is not None:
            longest = max(longest, len(policy.state.block.goodputs))
    assert longest <= MAX_BLOCK_SAMPLE
    assert policy.state.rates[0].off == pytest.approx(1 / 0.0001)
