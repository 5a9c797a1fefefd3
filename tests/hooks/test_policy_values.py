"""What the speculation on/off policy accepts: bad observations and configs are rejected with
their message; configs round-trip through JSON; presets and partial dicts."""

from __future__ import annotations

import json
import textwrap
from dataclasses import replace

import pytest
from tests.hooks.policy_support import BATCH_ONLY, GATED

from sgtrace.payload.policies import make_policy, policy_from_dict
from sgtrace.payload.policy import CONFIG_KEYS, PRESETS, Observation, PolicyConfig, PolicyKind, Tier

# --- bad input ------------------------------------------------------------------------------


def test_step_going_back_is_an_error() -> None:
    policy = make_policy(BATCH_ONLY)
    policy.decide(Observation(5, 1, None, True))
    with pytest.raises(ValueError) as info:
        policy.decide(Observation(4, 1, None, True))
    assert str(info.value) == (
        "step went back from 5 to 4: "
        "Observation(step=4, batch_size=1, accept_lengths=None, spec_on=True, step_period_s=None, "
        "interrupted_period_s=None, arriving=0, cohort=0, cohort_tokens=0, wave_lengths=())"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"step": -1, "batch_size": 1, "accept_lengths": None, "spec_on": True},
            "step and batch_size must be integers >= 0: "
            "Observation(step=-1, batch_size=1, accept_lengths=None, spec_on=True, step_period_s=None, "
            "interrupted_period_s=None, arriving=0, cohort=0, cohort_tokens=0, wave_lengths=())",
        ),
        (
            {"step": 0, "batch_size": 1.0, "accept_lengths": None, "spec_on": True},
            "step and batch_size must be integers >= 0: "
            "Observation(step=0, batch_size=1.0, accept_lengths=None, spec_on=True, step_period_s=None, "
            "interrupted_period_s=None, arriving=0, cohort=0, cohort_tokens=0, wave_lengths=())",
        ),
        (
            {"step": 0, "batch_size": 1, "accept_lengths": (0.0,), "spec_on": True},
            "accept lengths must be numbers >= 1.0 (bonus token included): "
            "Observation(step=0, batch_size=1, accept_lengths=(0.0,), spec_on=True, step_period_s=None, "
            "interrupted_period_s=None, arriving=0, cohort=0, cohort_tokens=0, wave_lengths=())",
        ),
        (
            {"step": 0, "batch_size": 1, "accept_lengths": (float("nan"),), "spec_on": True},
            "accept lengths must be numbers >= 1.0 (bonus token included): "
            "Observation(step=0, batch_size=1, accept_lengths=(nan,), spec_on=True, step_period_s=None, "
            "interrupted_period_s=None, arriving=0, cohort=0, cohort_tokens=0, wave_lengths=())",
        ),
        (
            {
                "step": 0,
                "batch_size": 1,
                "accept_lengths": None,
                "spec_on": True,
                "step_period_s": 0.01,
                "interrupted_period_s": 0.02,
            },
            "a period is either consecutive or interrupted, not both: "
            "Observation(step=0, batch_size=1, accept_lengths=None, spec_on=True, "
            "step_period_s=0.01, interrupted_period_s=0.02, arriving=0, cohort=0, cohort_tokens=0, wave_lengths=())",
        ),
        (
            {
                "step": 0,
                "batch_size": 1,
                "accept_lengths": None,
                "spec_on": True,
                "interrupted_period_s": -1.0,
            },
            "step periods must be numbers of seconds >= 0 or None: "
            "Observation(step=0, batch_size=1, accept_lengths=None, spec_on=True, "
            "step_period_s=None, interrupted_period_s=-1.0, arriving=0, cohort=0, cohort_tokens=0, wave_lengths=())",
        ),
        (
            {"step": 0, "batch_size": 8, "accept_lengths": None, "spec_on": True, "cohort": 8},
            "a cohort is told on an arrival only: "
            "Observation(step=0, batch_size=8, accept_lengths=None, spec_on=True, "
            "step_period_s=None, interrupted_period_s=None, arriving=0, cohort=8, cohort_tokens=0, wave_lengths=())",
        ),
        (
            {
                "step": 0,
                "batch_size": 8,
                "accept_lengths": None,
                "spec_on": True,
                "arriving": 8,
                "wave_lengths": (0, 64),
            },
            "wave lengths must be integers >= 1: "
            "Observation(step=0, batch_size=8, accept_lengths=None, spec_on=True, "
            "step_period_s=None, interrupted_period_s=None, arriving=8, cohort=0, cohort_tokens=0, wave_lengths=(0, 64))",
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
        "and presets batch-size, calibrated, default, threshold"
    )


# --- config values -------------------------------------------------------------------------


def test_config_json_round_trip() -> None:
    configs = [
        PolicyConfig(),
        PolicyConfig(preset="batch-size", kind=PolicyKind.THRESHOLD, acceptance_gate=False),
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
          "kind": "calibrated",
          "margin_z": 2.0,
          "max_probe_interval_steps": 8192,
          "measure": false,
          "measure_margin": 0.03,
          "measure_s": 0.25,
          "measure_steps": 8,
          "min_accept_length": null,
          "min_accept_samples": 32,
          "min_dwell_steps": 32,
          "min_margin": 0.02,
          "min_samples": 8,
          "num_steps": 3,
          "off_above": 16,
          "on_below": 8,
          "on_delay_steps": 0,
          "preset": "default",
          "probe_backoff": 2,
          "probe_interval_steps": 512,
          "probe_share": 0.03125,
          "probe_steps": 32,
          "remeasure_s": 30.0,
          "tiers": [
            {
              "min_batch_size": 1,
              "num_steps": 3
            }
          ],
          "toggle_every_steps": 0,
          "window_results": 16
        }
        """
    )


def test_presets_and_partial_dicts() -> None:
    assert sorted(PRESETS) == ["batch-size", "calibrated", "default", "threshold"]
    assert PolicyConfig.from_dict({"preset": "threshold"}) == PolicyConfig(
        preset="threshold", kind=PolicyKind.THRESHOLD
    )
    assert PolicyConfig.from_dict({}) == PolicyConfig()
    assert PolicyConfig.from_dict({"preset": "calibrated"}) == PolicyConfig(
        preset="calibrated", kind=PolicyKind.CALIBRATED
    )
    assert PolicyConfig.from_dict({"preset": "batch-size"}) == PolicyConfig(
        preset="batch-size", kind=PolicyKind.THRESHOLD, acceptance_gate=False
    )
    assert PolicyConfig.from_dict({"draft_cost_ratio": 1, "min_accept_length": 2}) == (
        PolicyConfig(draft_cost_ratio=1.0, min_accept_length=2.0)
    )
    assert isinstance(PolicyConfig.from_dict({"draft_cost_ratio": 1}).draft_cost_ratio, float)


def test_probe_interval_without_back_off_stays_put() -> None:
    config = replace(GATED, probe_backoff=1)
    assert [config.probe_interval(n) for n in range(3)] == [10, 10, 10]
