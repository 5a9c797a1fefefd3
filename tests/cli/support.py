"""Run ``sgtrace`` in-process, as the CLI tests do: ``run(ARGS)`` or ``sgtrace(PROGRAM, ARGS)``;
``short_edges`` reads the edges of a JSON graph as ``caller -> callee``."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from sgtrace.cli import main


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def sgtrace(program: Path, *args: str | Path) -> Result:
    """``sgtrace ARGS --source PROGRAM`` with the summary cache off."""
    return run(*args, "--source", program, "--no-cache")


def short_edges(stdout: str) -> list[str]:
    data = json.loads(stdout)
    return sorted(
        f"{e['source'].split(':')[1]} -> {e['target'].split(':')[1]}" for e in data["edges"]
    )
