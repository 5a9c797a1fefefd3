"""What starting ``sgtrace`` costs and how it is installed: commands load only when run, and the
console script behaves as the library entry point."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.support import run

# -- start-up: commands load when run -----------------------------------------------------------
COMMANDS = ["callgraph", "find", "inject-hook", "launch", "report", "trace", "validate"]
HEAVY = ("libcst", "networkx", "pydot", "sgtrace.tracer", "sgtrace.hooks", "sgtrace.graphs.resolve")
LOADED = """\
import json, sys
from sgtrace.cli import main
try:
    main(sys.argv[1:], standalone_mode=False)
finally:
    heavy = [m for m in sys.modules if m.startswith(HEAVY)]
    print(json.dumps({"heavy": sorted(heavy), "commands": main.list_commands(None)}), file=sys.stderr)
"""


def loaded_by(*args: str | Path) -> dict[str, list[str]]:
    """What ``sgtrace ARGS`` imported of :data:`HEAVY`, and the commands it knows, run alone."""
    code = f"HEAVY = {HEAVY!r}\n{LOADED}"
    proc = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stderr.splitlines()[-1])


def test_every_command_is_listed_without_being_imported() -> None:
    assert loaded_by("--version") == {"heavy": [], "commands": COMMANDS}
    section = run("--help").stdout.split("Commands:\n", 1)[1]
    assert [line.split()[0] for line in section.splitlines()] == COMMANDS


def test_a_warm_callgraph_loads_no_parser_resolver_or_tracer(program: Path, tmp_path: Path) -> None:
    args = ("callgraph", "pipeline.py", "--source", program, "--cache-dir", tmp_path / "cache")
    cold = run(*args, "--format", "json")
    assert loaded_by(*args, "--format", "json", "-o", tmp_path / "warm.json")["heavy"] == []
    assert (tmp_path / "warm.json").read_text(encoding="utf-8") == cold.stdout


# -- the console script -------------------------------------------------------------------------
def console_script() -> str:
    beside = Path(sys.executable).parent / "sgtrace"
    found = str(beside) if beside.is_file() else shutil.which("sgtrace")
    if found is None:
        pytest.skip("the sgtrace console script is not installed")
    return found


def test_console_script_matches_the_library_entry_point(program: Path) -> None:
    exe = console_script()
    args = ["find", "clean", "--source", str(program), "--no-cache"]
    proc = subprocess.run([exe, *args], capture_output=True, text=True, check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, run(*args).stdout, "")
    missing = subprocess.run(
        [exe, "find", "claen", "--source", str(program), "--no-cache"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == (
        f"Error: no function or class named 'claen' in dir:{program}; did you mean clean?\n"
    )
    usage = subprocess.run([exe, "find"], capture_output=True, text=True, check=False)
    assert usage.returncode == 2
