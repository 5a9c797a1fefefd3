"""Load and check the speculation policy's config: preset, then file, then flags.

``sgtrace inject-hook`` takes the policy from a TOML or JSON file (flat keys, the names of
:class:`~sgtrace.payload.policy.PolicyConfig`'s fields) and from command-line flags; a flag wins
over the file, and the file over the preset it names (``default`` or ``batch-size``). Every bad
key is reported at once in one :class:`~sgtrace.errors.ConfigError` naming where it came from
(file or flag), the key, the bad value and what is expected, with close matches for unknown
keys. The checked config is then written into the hook directory with ``to_json()``; the
stdlib-only :mod:`sgtrace.payload.policy` reads it back inside SGLang's processes.

A file::

    preset = "batch-size"
    on_below = 4
    off_above = 16
    [[tiers]]              # optional, advisory: draft steps from a batch size up
    min_batch_size = 4
    num_steps = 1

>>> load_policy_config(None, {"preset": "batch-size", "on-below": "4"}).on_below
4
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TypeGuard

from sgtrace.errors import ConfigError, suggest
from sgtrace.payload.policy import CONFIG_KEYS, PRESETS, PolicyConfig, PolicyKind

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

OverrideValue = str | int | float | bool
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_AUTO = frozenset({"auto", "none", ""})
_TIERS_EXPECTED = (
    "a list of tables {min_batch_size, num_steps} (on the command line: MIN:STEPS,MIN:STEPS)"
)


@dataclass(frozen=True)
class ConfigProblem:
    """One bad key: ``key`` (``tiers[1].num_steps`` inside tiers), its value, what is expected."""

    key: str
    value: object
    expected: str

    def __str__(self) -> str:
        return f"{self.key} = {self.value!r}; expected {self.expected}"


def load_policy_config(
    path: Path | None, overrides: Mapping[str, OverrideValue] = MappingProxyType({})
) -> PolicyConfig:
    """The policy config from the preset, the file at ``path`` (if any) and ``overrides``.

    ``overrides`` come from flags: keys may be written ``on_below``, ``on-below`` or
    ``--on-below``; string values are parsed for the key's type (``true``/``false``,
    ``auto`` for ``min_accept_length``, ``1:3,16:1`` for ``tiers``). Raises
    :class:`~sgtrace.errors.ConfigError` for an unreadable file or any bad key.
    """
    merged: dict[str, object] = {}
    origins: dict[str, str] = {}
    unknown: list[str] = []
    layers: list[tuple[Mapping[str, object], str | None]] = []
    if path is not None:
        layers.append((read_policy_file(path), f"policy file {path}"))
    flags = {_flag_key(key): value for key, value in overrides.items()}
    layers.append(({key: _parse_flag(key, value) for key, value in flags.items()}, None))
    for data, label in layers:
        for key, value in data.items():
            origin = label if label is not None else f"flag --{key.replace('_', '-')}"
            if key not in CONFIG_KEYS:
                unknown.append(f"{origin}: unknown key {key!r}{_hint(key, CONFIG_KEYS)}")
                continue
            if key == "min_accept_length" and value == "auto":
                value = None
            merged[key], origins[key] = value, origin
    preset = merged.get("preset", "default")
    if isinstance(preset, str) and preset in PRESETS:
        problems, base = [], PRESETS[preset]
    else:
        problems, base = [_preset_problem(preset)], PRESETS["default"]
    problems += check_policy_values({**base, **merged})
    problems += _unused_load_rule(base, merged)
    fallback = f"preset {base['preset']!r}"
    lines = unknown + [f"{origins.get(_base_key(p.key), fallback)}: {p}" for p in problems]
    if len(lines) == 1:
        raise ConfigError(f"invalid policy config: {lines[0]}")
    if lines:
        raise ConfigError(
            f"invalid policy config ({len(lines)} problems):\n  " + "\n  ".join(lines)
        )
    return PolicyConfig.from_dict(merged)


def read_policy_file(path: Path) -> dict[str, object]:
    """The top-level table of a ``.toml`` or ``.json`` policy file, unchecked."""
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise ConfigError(
            f"policy config file {path} has suffix {suffix!r}; expected a .toml or .json file"
        )
    if not path.exists():
        raise ConfigError(f"policy config file {path} does not exist; check the path")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read policy config file {path}: {exc}") from exc
    try:
        data = tomllib.loads(text) if suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        kind = "TOML" if suffix == ".toml" else "JSON"
        raise ConfigError(f"policy config file {path} is not valid {kind}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(
            f"policy config file {path} holds a JSON {type(data).__name__}; "
            "expected an object of policy keys"
        )
    return data


def check_policy_values(v: Mapping[str, object]) -> list[ConfigProblem]:
    """Every bad value of a complete set of policy values, in field order.

    >>> check_policy_values({**PRESETS["default"], "on_below": 20, "off_above": 16})
    [ConfigProblem(key='off_above', value=16, expected='an integer greater than on_below (20)')]
    """
    problems: list[ConfigProblem] = []

    def need(key: str, ok: bool, expected: str) -> None:
        if not ok:
            problems.append(ConfigProblem(key, v[key], expected))

    low = v["on_below"] + 1 if _is_int(v["on_below"]) else 1
    wait = v["probe_interval_steps"] if _is_int(v["probe_interval_steps"], 1) else 1
    ratio, alpha, min_accept = v["draft_cost_ratio"], v["accept_ema_alpha"], v["min_accept_length"]
    need("on_below", _is_int(v["on_below"]), "an integer >= 0")
    need("off_above", _is_int(v["off_above"], low), f"an integer greater than on_below ({low - 1})")
    need("on_delay_steps", _is_int(v["on_delay_steps"]), "an integer >= 0")
    need("min_dwell_steps", _is_int(v["min_dwell_steps"]), "an integer >= 0")
    need("acceptance_gate", isinstance(v["acceptance_gate"], bool), "true or false")
    need("num_steps", _is_int(v["num_steps"], 1), "an integer >= 1")
    need("draft_cost_ratio", _is_number(ratio) and ratio >= 0, "a number >= 0")
    need(
        "min_accept_length",
        min_accept is None or (_is_number(min_accept) and min_accept >= 1),
        "a number >= 1.0 (the bonus token counts), or 'auto' for the goodput breakeven",
    )
    need("accept_ema_alpha", _is_number(alpha) and 0 < alpha <= 1, "a number in (0, 1]")
    need("min_accept_samples", _is_int(v["min_accept_samples"], 1), "an integer >= 1")
    need("probe_interval_steps", _is_int(v["probe_interval_steps"], 1), "an integer >= 1")
    need("probe_steps", _is_int(v["probe_steps"], 1), "an integer >= 1")
    need("probe_backoff", _is_int(v["probe_backoff"], 1), "an integer >= 1")
    need(
        "max_probe_interval_steps",
        _is_int(v["max_probe_interval_steps"], wait),
        f"an integer >= probe_interval_steps ({wait})",
    )
    need("measure", isinstance(v["measure"], bool), "true or false")
    need("measure_steps", _is_int(v["measure_steps"], 1), "an integer >= 1")
    seconds, margin, again = v["measure_s"], v["measure_margin"], v["remeasure_s"]
    need("measure_s", _is_number(seconds) and seconds >= 0, "a number of seconds >= 0")
    need("measure_margin", _is_number(margin) and 0 <= margin < 1, "a number in [0, 1)")
    need("remeasure_s", _is_number(again) and again > 0, "a number of seconds > 0")
    kinds = [kind.value for kind in PolicyKind]
    need("kind", v["kind"] in kinds, "one of " + ", ".join(repr(kind) for kind in kinds))
    need("window_results", _is_int(v["window_results"], 1), "an integer >= 1")
    window = v["window_results"] if _is_int(v["window_results"], 1) else 1
    need(
        "min_samples",
        _is_int(v["min_samples"], 1) and v["min_samples"] <= window,
        f"an integer from 1 to window_results ({window})",
    )
    share, floor, z = v["probe_share"], v["min_margin"], v["margin_z"]
    need("probe_share", _is_number(share) and 0 < share < 1, "a number in (0, 1)")
    need("min_margin", _is_number(floor) and 0 <= floor < 1, "a number in [0, 1)")
    need("margin_z", _is_number(z) and z >= 0, "a number >= 0")
    max_steps = v["num_steps"] if _is_int(v["num_steps"], 1) else 1
    return problems + _check_tiers(v["tiers"], max_steps)


def _check_tiers(tiers: object, max_steps: int) -> list[ConfigProblem]:
    if not isinstance(tiers, (list, tuple)):
        return [ConfigProblem("tiers", tiers, _TIERS_EXPECTED)]
    problems: list[ConfigProblem] = []
    low = 0
    for index, tier in enumerate(tiers):
        key = f"tiers[{index}]"
        if not isinstance(tier, Mapping) or set(tier) != {"min_batch_size", "num_steps"}:
            expected = "a table of exactly min_batch_size and num_steps"
            problems.append(ConfigProblem(key, tier, expected))
            continue
        start, steps = tier["min_batch_size"], tier["num_steps"]
        if _is_int(start, low):
            low = start + 1
        else:
            expected = f"an integer >= {low}" + (" (above the tier before)" if index else "")
            problems.append(ConfigProblem(f"{key}.min_batch_size", start, expected))
        if not (_is_int(steps, 1) and steps <= max_steps):
            expected = (
                f"an integer from 1 to num_steps ({max_steps}); off_above, not 0, turns it off"
            )
            problems.append(ConfigProblem(f"{key}.num_steps", steps, expected))
    return problems


def _is_int(value: object, low: int = 0) -> TypeGuard[int]:
    """Whether ``value`` is an int (not a bool) >= ``low``; narrows it to int where true."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _is_number(value: object) -> TypeGuard[float]:
    """Whether ``value`` is a finite int or float (not a bool); narrows it where true."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _base_key(key: str) -> str:
    return key.split("[", 1)[0]


def _hint(name: str, candidates: tuple[str, ...] | list[str]) -> str:
    matches = suggest(name, candidates)
    if matches:
        return "; did you mean " + ", ".join(matches) + "?"
    return "; known keys: " + ", ".join(candidates)


# The load rule's own settings. The default policy (calibrated) finds the crossover itself and
# reads off_above/on_below only where the TP ranks cannot share a decision, so one of these set
# without choosing a policy would be silently ignored: it is refused, saying what to add.
LOAD_RULE_KEYS = (
    "on_below",
    "off_above",
    "on_delay_steps",
    "min_dwell_steps",
    "probe_interval_steps",
    "probe_steps",
    "min_accept_samples",
)


def _unused_load_rule(
    base: Mapping[str, object], merged: Mapping[str, object]
) -> list[ConfigProblem]:
    """The load rule's settings given while the policy is the default's, not chosen."""
    chosen = "kind" in merged or merged.get("preset", "default") != "default"
    if chosen or merged.get("measure") is True or base["kind"] != PolicyKind.CALIBRATED.value:
        return []
    expected = (
        '--preset threshold with it (kind = "threshold" in a file): it is a setting of the load '
        "rule, and the default policy, calibrated, measures its own step times instead"
    )
    return [ConfigProblem(key, merged[key], expected) for key in LOAD_RULE_KEYS if key in merged]


def _preset_problem(preset: object) -> ConfigProblem:
    names = sorted(PRESETS)
    expected = "one of " + ", ".join(repr(name) for name in names)
    if isinstance(preset, str) and suggest(preset, names):
        expected += "; did you mean " + ", ".join(suggest(preset, names)) + "?"
    return ConfigProblem("preset", preset, expected)


def _flag_key(key: str) -> str:
    """``--on-below`` and ``on-below`` -> ``on_below``."""
    return key.lstrip("-").replace("-", "_")


def _parse_flag(key: str, value: OverrideValue) -> object:
    """A flag's string parsed for the key's type; left as is when it does not parse.

    The checks then report an unparsable string with what the key expects.
    """
    if not isinstance(value, str) or key not in CONFIG_KEYS:
        return value
    text = value.strip()
    if key == "tiers":
        return _parse_tiers(text)
    if key == "min_accept_length" and text.lower() in _AUTO:
        return None
    kind = type(PRESETS["default"][key])
    try:
        if kind is bool and text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        if kind is int:
            return int(text, 10)
        if kind is float or key == "min_accept_length":
            return float(text)
    except ValueError:
        return value
    return value


def _parse_tiers(text: str) -> object:
    """``1:3,16:1`` -> ``[{min_batch_size: 1, num_steps: 3}, ...]``; ``""`` -> ``[]``."""
    tiers: list[dict[str, int]] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        start, _, steps = item.partition(":")
        try:
            tiers.append({"min_batch_size": int(start, 10), "num_steps": int(steps, 10)})
        except ValueError:
            return text
    return tiers
