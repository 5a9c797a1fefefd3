"""Policy config from presets, TOML and JSON files and flags; every error message in full."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sgtrace.errors import ConfigError
from sgtrace.hooks.policy_config import (
    ConfigProblem,
    check_policy_values,
    load_policy_config,
    read_policy_file,
)
from sgtrace.payload.policies import policy_from_dict
from sgtrace.payload.policy import CONFIG_KEYS, PolicyConfig, Tier

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TOML = """\
preset = "batch-size"
on_below = 4
off_above = 24
min_dwell_steps = 10
draft_cost_ratio = 0
[[tiers]]
min_batch_size = 1
num_steps = 3
[[tiers]]
min_batch_size = 8
num_steps = 1
"""

EXPECTED_FROM_TOML = PolicyConfig(
    preset="batch-size",
    on_below=4,
    off_above=24,
    min_dwell_steps=10,
    acceptance_gate=False,
    draft_cost_ratio=0.0,
    tiers=(Tier(1, 3), Tier(8, 1)),
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def config_error(path: Path | None, overrides: dict[str, object] | None = None) -> str:
    """The message of the ConfigError that loading raises (fails if none is raised)."""
    with pytest.raises(ConfigError) as info:
        load_policy_config(path, overrides or {})
    return str(info.value)


# --- files, presets, flags -----------------------------------------------------------------


def test_no_file_and_no_flags_give_the_default_preset() -> None:
    assert load_policy_config(None, {}) == PolicyConfig()
    assert load_policy_config(None) == PolicyConfig()


def test_batch_size_preset_turns_the_gate_off() -> None:
    config = load_policy_config(None, {"preset": "batch-size"})
    assert config == PolicyConfig(preset="batch-size", acceptance_gate=False)


def test_toml_file(tmp_path: Path) -> None:
    assert load_policy_config(write(tmp_path, "p.toml", TOML)) == EXPECTED_FROM_TOML


def test_json_file(tmp_path: Path) -> None:
    data = tomllib.loads(TOML)
    path = write(tmp_path, "p.json", json.dumps(data))
    assert load_policy_config(path) == EXPECTED_FROM_TOML


def test_upper_case_suffix_is_accepted(tmp_path: Path) -> None:
    assert load_policy_config(write(tmp_path, "P.TOML", TOML)) == EXPECTED_FROM_TOML


def test_flags_override_the_file_and_the_files_preset(tmp_path: Path) -> None:
    path = write(tmp_path, "p.toml", TOML)
    config = load_policy_config(
        path,
        {
            "--preset": "default",
            "on-below": "2",
            "off_above": 30,
            "--acceptance-gate": "yes",
            "accept-ema-alpha": "0.25",
            "min_accept_length": "1.5",
            "tiers": "",
        },
    )
    assert config == PolicyConfig(
        preset="default",
        on_below=2,
        off_above=30,
        min_dwell_steps=10,
        acceptance_gate=True,
        draft_cost_ratio=0.0,
        accept_ema_alpha=0.25,
        min_accept_length=1.5,
    )


def test_the_file_overrides_its_preset(tmp_path: Path) -> None:
    path = write(tmp_path, "p.toml", 'preset = "batch-size"\nacceptance_gate = true\n')
    assert load_policy_config(path) == PolicyConfig(preset="batch-size", acceptance_gate=True)


@pytest.mark.parametrize(
    ("key", "text", "value"),
    [
        ("acceptance_gate", "TRUE", True),
        ("acceptance_gate", "on", True),
        ("acceptance_gate", "1", True),
        ("acceptance_gate", "False", False),
        ("acceptance_gate", "no", False),
        ("acceptance_gate", "0", False),
        ("min_dwell_steps", " 7 ", 7),
        ("draft_cost_ratio", "0.05", 0.05),
        ("draft_cost_ratio", "1", 1.0),
        ("min_accept_length", "auto", None),
        ("min_accept_length", "None", None),
        ("min_accept_length", "2", 2.0),
        ("measure", "true", True),
        ("measure_margin", "0.05", 0.05),
        ("measure_steps", "24", 24),
        ("measure_s", "0.25", 0.25),
        ("remeasure_s", "10", 10.0),
        ("tiers", "1:3, 16:1", (Tier(1, 3), Tier(16, 1))),
        ("tiers", "", ()),
    ],
)
def test_flag_strings_are_parsed_for_the_keys_type(key: str, text: str, value: object) -> None:
    config = load_policy_config(None, {key: text})
    assert getattr(config, key) == value
    assert type(getattr(config, key)) is type(value)


def test_flags_may_also_carry_typed_values() -> None:
    config = load_policy_config(None, {"acceptance_gate": False, "num_steps": 2, "tiers": "1:2"})
    assert (config.acceptance_gate, config.num_steps, config.tiers) == (False, 2, (Tier(1, 2),))


def test_auto_in_a_file_means_the_breakeven(tmp_path: Path) -> None:
    path = write(tmp_path, "p.toml", 'min_accept_length = "auto"\n')
    assert load_policy_config(path).min_accept_length is None
    json_path = write(tmp_path, "p.json", '{"min_accept_length": null}')
    assert load_policy_config(json_path).min_accept_length is None


def test_written_json_loads_back_to_the_same_config(tmp_path: Path) -> None:
    config = load_policy_config(write(tmp_path, "p.toml", TOML), {"min_accept_length": "1.25"})
    path = write(tmp_path, "sgtrace_policy.json", config.to_json())
    assert load_policy_config(path) == config
    assert policy_from_dict(json.loads(path.read_text())).config == config


# --- file errors ---------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    assert config_error(path) == f"policy config file {path} does not exist; check the path"


def test_wrong_suffix(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", "on_below: 3\n")
    assert config_error(path) == (
        f"policy config file {path} has suffix '.yaml'; expected a .toml or .json file"
    )


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "dir.toml"
    path.mkdir()
    with pytest.raises(OSError) as reading:
        path.read_text(encoding="utf-8")
    assert config_error(path) == f"cannot read policy config file {path}: {reading.value}"


def test_bad_toml(tmp_path: Path) -> None:
    text = "on_below = \n"
    path = write(tmp_path, "p.toml", text)
    with pytest.raises(tomllib.TOMLDecodeError) as parsing:
        tomllib.loads(text)
    assert config_error(path) == f"policy config file {path} is not valid TOML: {parsing.value}"


def test_bad_json(tmp_path: Path) -> None:
    text = '{"on_below": }'
    path = write(tmp_path, "p.json", text)
    with pytest.raises(json.JSONDecodeError) as parsing:
        json.loads(text)
    assert config_error(path) == f"policy config file {path} is not valid JSON: {parsing.value}"


def test_json_that_is_not_an_object(tmp_path: Path) -> None:
    path = write(tmp_path, "p.json", "[1, 2]")
    assert config_error(path) == (
        f"policy config file {path} holds a JSON list; expected an object of policy keys"
    )


def test_read_policy_file_returns_the_raw_table(tmp_path: Path) -> None:
    path = write(tmp_path, "p.toml", 'on_belw = "x"\n')
    assert read_policy_file(path) == {"on_belw": "x"}


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
    path = write(tmp_path, "p.json", json.dumps({key: value}))
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
    assert config_error(None, {"--min-dwell-steps": "ten"}) == (
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
    assert config_error(None, {"on_below": "20"}) == (
        "invalid policy config: preset 'default': "
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
        ("batchsize", "one of 'batch-size', 'default'; did you mean batch-size?"),
        ("fast", "one of 'batch-size', 'default'"),
        (3, "one of 'batch-size', 'default'"),
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
        "expected one of 'batch-size', 'default'; did you mean batch-size?\n"
        f"  policy file {path}: off_above = 2; expected an integer greater than on_below (8)\n"
        "  flag --min-dwell-steps: min_dwell_steps = 'x'; expected an integer >= 0\n"
        f"  policy file {path}: tiers[0].num_steps = 0; "
        "expected an integer from 1 to num_steps (3); off_above, not 0, turns it off"
    )


def test_a_flag_fixes_a_bad_file_value(tmp_path: Path) -> None:
    path = write(tmp_path, "p.toml", "on_below = -1\n")
    assert load_policy_config(path, {"on_below": 4}).on_below == 4


def test_check_policy_values_of_a_valid_config_is_empty() -> None:
    assert check_policy_values(PolicyConfig(tiers=(Tier(0, 1),)).to_dict()) == []
    assert check_policy_values({**PolicyConfig().to_dict(), "num_steps": 0}) == [
        ConfigProblem("num_steps", 0, "an integer >= 1")
    ]
