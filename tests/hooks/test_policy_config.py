"""Policy config from presets, TOML and JSON files and flags; a file that cannot be read or
parsed gives its error message in full (bad values: test_policy_config_values.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tests.hooks.policy_config_support import config_error, write

from sgtrace.hooks.policy_config import load_policy_config, read_policy_file
from sgtrace.payload.policies import policy_from_dict
from sgtrace.payload.policy import PolicyConfig, PolicyKind, Tier

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
    kind=PolicyKind.THRESHOLD,
    on_below=4,
    off_above=24,
    min_dwell_steps=10,
    acceptance_gate=False,
    draft_cost_ratio=0.0,
    tiers=(Tier(1, 3), Tier(8, 1)),
)


# --- files, presets, flags -----------------------------------------------------------------


def test_no_file_and_no_flags_give_the_default_preset() -> None:
    assert load_policy_config(None, {}) == PolicyConfig()
    assert load_policy_config(None) == PolicyConfig()


def test_batch_size_preset_turns_the_gate_off() -> None:
    config = load_policy_config(None, {"preset": "batch-size"})
    assert config == PolicyConfig(
        preset="batch-size", kind=PolicyKind.THRESHOLD, acceptance_gate=False
    )


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
            "--preset": "threshold",
            "on-below": "2",
            "off_above": 30,
            "--acceptance-gate": "yes",
            "accept-ema-alpha": "0.25",
            "min_accept_length": "1.5",
            "tiers": "",
        },
    )
    assert config == PolicyConfig(
        preset="threshold",
        kind=PolicyKind.THRESHOLD,
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
    assert load_policy_config(path) == PolicyConfig(
        preset="batch-size", kind=PolicyKind.THRESHOLD, acceptance_gate=True
    )


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
    config = load_policy_config(None, {"preset": "threshold", key: text})
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
