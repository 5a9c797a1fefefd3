"""Write a policy file and read the message of the ``ConfigError`` that loading it raises."""

from __future__ import annotations

from pathlib import Path

import pytest

from sgtrace.errors import ConfigError
from sgtrace.hooks.policy_config import load_policy_config


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def config_error(path: Path | None, overrides: dict[str, object] | None = None) -> str:
    """The message of the ConfigError that loading raises (fails if none is raised)."""
    with pytest.raises(ConfigError) as info:
        load_policy_config(path, overrides or {})
    return str(info.value)
