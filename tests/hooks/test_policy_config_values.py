"""Bad policy config values, from files and flags: every error message in full, with close
matches for unknown keys and every problem reported at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.hooks.policy_config_support import config_error, write

from sgtrace.hooks.policy_config import ConfigProblem, check_policy_values, load_policy_config
from sgtrace.payload.policy import CONFIG_KEYS, PolicyConfig, PolicyKind, Tier

# --- value errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("on_below", -1, "an integer >= 0"),
        ("on_below", 2.0, "an integer >= 0"),
        ("on_below", True, "an integer >= 0"),
        ("off_above", 8, "an integer greater than on_below (8)"),
        ("min_dwell_steps", -3, "an integer >= 0"),
        ("acceptance_gate", 1, "true or false"),
        ("acceptance_gate", "yes", "true or false"),
        ("num_steps", 0, "an integer >= 1"),
        ("draft_cost_ratio", -0.5, "a number >= 0"),
        ("draft_cost_ratio", "cheap", "a number >= 0"),
        (
            "min_accept_length",
            0.5,
            "a number >= 1.0 (the bonus token counts), or 'auto' for the goodput breakeven",
        ),
        ("accept_ema_alpha", 0, "a number in (0, 1]"),
        ("accept_ema_alpha", 1.5, "a number in (0, 1]"),
        ("min_accept_samples", 0, "an integer >= 1"),
        ("probe_interval_steps", 0, "an integer >= 1"),
        ("probe_steps", 0, "an integer >= 1"),
        ("probe_backoff", 0, "an integer >= 1"),
        ("max_probe_interval_steps", 100, "an integer >= probe_interval_steps (512)"),
        ("measure", "sometimes", "true or false"),
        ("measure_steps", 0, "an integer >= 1"),
        ("measure_margin", 1.0, "a number in [0, 1)"),
        ("measure_margin", -0.01, "a number in [0, 1)"),
        ("measure_s", -1, "a number of seconds >= 0"),
        ("remeasure_s", 0, "a number of seconds > 0"),
        (
            "tiers",
            {"min_batch_size": 1},
            "a list of tables {min_batch_size, num_steps} "
            "(on the command line: MIN:STEPS,MIN:STEPS)",
        ),
    ],
)
def test_each_bad_value_in_a_json_file(
    tmp_path: Path, key: str, value: object, expected: str
) -> None:
    path = write(tmp_path, "p.json", json.dumps({"kind": "threshold", key: value}))
    assert config_error(path) == (
        f"invalid policy config: policy file {path}: {key} = {value!r}; expected {expected}"
    )


@pytest.mark.parametrize(
    ("tiers", "message"),
    [
        (
            [{"min_batch_size": 1}],
            "tiers[0] = {'min_batch_size': 1}; "
            "expected a table of exactly min_batch_size and num_steps",
        ),
        (
            [3],
            "tiers[0] = 3; expected a table of exactly min_batch_size and num_steps",
        ),
        (
            [{"min_batch_size": -1, "num_steps": 1}],
            "tiers[0].min_batch_size = -1; expected an integer >= 0",
        ),
        (
            [{"min_batch_size": 8, "num_steps": 2}, {"min_batch_size": 8, "num_steps": 1}],
            "tiers[1].min_batch_size = 8; expected an integer >= 9 (above the tier before)",
        ),
        (
            [{"min_batch_size": 1, "num_steps": 0}],
            "tiers[0].num_steps = 0; "
            "expected an integer from 1 to num_steps (3); off_above, not 0, turns it off",
        ),
        (
            [{"min_batch_size": 1, "num_steps": 4}],
            "tiers[0].num_steps = 4; "
            "expected an integer from 1 to num_steps (3); off_above, not 0, turns it off",
        ),
    ],
)
def test_each_bad_tier_in_a_json_file(tmp_path: Path, tiers: object, message: str) -> None:
    path = write(tmp_path, "p.json", json.dumps({"tiers": tiers}))
    assert config_error(path) == f"invalid policy config: policy file {path}: {message}"


def test_bad_flag_strings_name_the_flag() -> None:
    assert config_error(None, {"--preset": "threshold", "--min-dwell-steps": "ten"}) == (
        "invalid policy config: flag --min-dwell-steps: "
        "min_dwell_steps = 'ten'; expected an integer >= 0"
    )
    assert config_error(None, {"acceptance_gate": "maybe"}) == (
        "invalid policy config: flag --acceptance-gate: "
        "acceptance_gate = 'maybe'; expected true or false"
    )
    assert config_error(None, {"draft_cost_ratio": "nan"}) == (
        "invalid policy config: flag --draft-cost-ratio: "
        "draft_cost_ratio = nan; expected a number >= 0"
    )
    assert config_error(None, {"tiers": "1:3,8"}) == (
        "invalid policy config: flag --tiers: tiers = '1:3,8'; expected a list of tables "
        "{min_batch_size, num_steps} (on the command line: MIN:STEPS,MIN:STEPS)"
    )


def test_a_clash_with_a_preset_value_names_the_preset() -> None:
    assert config_error(None, {"preset": "threshold", "on_below": "20"}) == (
        "invalid policy config: preset 'threshold': "
        "off_above = 16; expected an integer greater than on_below (20)"
    )


def test_unknown_key_with_a_close_match(tmp_path: Path) -> None:
    path = write(tmp_path, "p.toml", "on_belw = 3\n")
    assert config_error(path) == (
        f"invalid policy config: policy file {path}: unknown key 'on_belw'; did you mean on_below?"
    )


def test_unknown_flag_with_a_close_match() -> None:
    assert config_error(None, {"--probe-backof": "3"}) == (
        "invalid policy config: flag --probe-backof: "
        "unknown key 'probe_backof'; did you mean probe_backoff?"
    )


def test_unknown_key_without_a_close_match(tmp_path: Path) -> None:
    path = write(tmp_path, "p.json", '{"colour": "blue"}')
    assert config_error(path) == (
        f"invalid policy config: policy file {path}: "
        f"unknown key 'colour'; known keys: {', '.join(CONFIG_KEYS)}"
    )


@pytest.mark.parametrize(
    ("preset", "expected"),
    [
        (
            "batchsize",
            "one of 'batch-size', 'calibrated', 'default', 'threshold'; did you mean batch-size?",
        ),
        ("fast", "one of 'batch-size', 'calibrated', 'default', 'threshold'"),
        (3, "one of 'batch-size', 'calibrated', 'default', 'threshold'"),
    ],
)
def test_unknown_preset(tmp_path: Path, preset: object, expected: str) -> None:
    path = write(tmp_path, "p.json", json.dumps({"preset": preset}))
    assert config_error(path) == (
        f"invalid policy config: policy file {path}: preset = {preset!r}; expected {expected}"
    )


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "p.toml",
        'on_belw = 3\npreset = "batchsize"\noff_above = 2\n'
        "[[tiers]]\nmin_batch_size = 0\nnum_steps = 0\n",
    )
    message = config_error(path, {"--min-dwell-steps": "x", "probe_backof": "3"})
    assert message == (
        "invalid policy config (6 problems):\n"
        f"  policy file {path}: unknown key 'on_belw'; did you mean on_below?\n"
        "  flag --probe-backof: unknown key 'probe_backof'; did you mean probe_backoff?\n"
        f"  policy file {path}: preset = 'batchsize'; "
        "expected one of 'batch-size', 'calibrated', 'default', 'threshold'; did you mean batch-size?\n"
        f"  policy file {path}: off_above = 2; expected an integer greater than on_below (8)\n"
        "  flag --min-dwell-steps: min_dwell_steps = 'x'; expected an integer >= 0\n"
        f"  policy file {path}: tiers[0].num_steps = 0; "
        "expected an integer from 1 to num_steps (3); off_above, not 0, turns it off"
    )


def test_a_flag_fixes_a_bad_file_value(tmp_path: Path) -> None:
    path = write(tmp_path, "p.toml", 'kind = "threshold"\non_below = -1\n')
    assert load_policy_config(path, {"on_below": 4}).on_below == 4


def test_check_policy_values_of_a_valid_config_is_empty() -> None:
    assert check_policy_values(PolicyConfig(tiers=(Tier(0, 1),)).to_dict()) == []
    assert check_policy_values({**PolicyConfig().to_dict(), "num_steps": 0}) == [
        ConfigProblem("num_steps", 0, "an integer >= 1")
    ]


@pytest.mark.parametrize(
    ("key", "value"),
    [("on_below", 4), ("off_above", 40), ("on_delay_steps", 40), ("min_dwell_steps", 40)],
)
def test_a_load_rule_setting_without_a_chosen_policy_is_refused_saying_what_to_add(
    tmp_path: Path, key: str, value: int
) -> None:
    """The default policy (calibrated) would ignore it; --preset threshold (or kind) uses it."""
    flag = "--" + key.replace("_", "-")
    assert config_error(None, {flag: str(value)}) == (
        f"invalid policy config: flag {flag}: {key} = {value}; expected --preset threshold "
        'with it (kind = "threshold" in a file): it is a setting of the load rule, and the '
        "default policy, calibrated, measures its own step times instead"
    )
    chosen = load_policy_config(None, {"preset": "threshold", flag: str(value)})
    assert (getattr(chosen, key), chosen.kind) == (value, PolicyKind.THRESHOLD)
    path = write(tmp_path, "p.toml", f'kind = "threshold"\n{key} = {value}\n')
    assert getattr(load_policy_config(path), key) == value
    # chosen on purpose: the calibrated policy keeps off_above/on_below for TP ranks that
    # cannot share a decision
    kept = load_policy_config(None, {"preset": "calibrated", flag: str(value)})
    assert (getattr(kept, key), kept.kind) == (value, PolicyKind.CALIBRATED)
