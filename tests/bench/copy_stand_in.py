"""The GPU side of copy_check.sh and storm.sh, stood in for on this machine: a python3 wrapper
whose model builder writes only ``models.json`` (the rule's offset, from its options as the
real builder derives it) and whose ``sglang.launch_server`` is the copy-check stand-in server (it
echoes its arguments, PYTHONPATH and forced-retraction switch, one hook switch line, and answers
as the copy model of that offset), the recipe's bundle (present, already unpacked) and hook
directories (the payload in the first only, as ``--share-payload`` leaves it)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.bench.test_copy_check import STAND_IN

PYTHON3 = """#!/usr/bin/env bash
case " $* " in
  *make_copy_model.py*)  # models.json only: D from --offset, else --draft-lag + 1, else 2
    echo "builder: $*" >> "$2.args"
    lag=$(echo " $* " | sed -nE 's/.* --draft-lag ([0-9]+) .*/\\1/p')
    offset=$(echo " $* " | sed -nE 's/.* --offset ([0-9]+) .*/\\1/p')
    [ -n "$offset" ] || offset=$(( ${{lag:-1}} + 1 ))
    mkdir -p "$2" && printf '{{"offset": %s, "vocab": 4096}}\\n' "$offset" > "$2/models.json"
    echo '{{"rule": "stand-in"}}'; exit 0 ;;
  *" -m sglang.launch_server "*)
    port=$(echo " $* " | sed -E 's/.* --port ([0-9]+) .*/\\1/')
    model=$(echo " $* " | sed -E 's/.* --model-path ([^ ]+) .*/\\1/')
    offset=$(sed -E 's/.*"offset": ([0-9]+).*/\\1/' "$(dirname "$model")/models.json")
    echo "args: $*"; echo "pythonpath: $PYTHONPATH"; echo "retract: ${{SGLANG_TEST_RETRACT:-}}"
    echo "The server is fired up and ready to roll!"
    echo "sgtrace-hook switched spec=off (plain off state): 2 running requests retracted"
    exec {python} {server} "$port" none "$offset" ;;
esac
exec {python} "$@"
"""


def stand_in(tmp_path: Path, hooks: tuple[str, ...]) -> dict[str, str]:
    """Lay out the stand-ins under ``tmp_path``; the environment the scripts run with."""
    for d in ("bin", "recipe", "site"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "recipe" / "site.tar.xz").write_bytes(b"")
    (tmp_path / "site" / ".ok").write_text("")
    for k, hook in enumerate(hooks):
        (tmp_path / "hooks" / hook).mkdir(parents=True)
        (tmp_path / "hooks" / hook / "sgtrace_hook.json").write_text("{}")
        if k == 0:
            (tmp_path / "hooks" / hook / "sgtrace_payload").mkdir()
            (tmp_path / "hooks" / hook / "sitecustomize.py").write_text("# the payload's\n")
    server = tmp_path / "stand_in.py"
    server.write_text(STAND_IN)
    wrapper = tmp_path / "bin" / "python3"
    wrapper.write_text(PYTHON3.format(python=sys.executable, server=server))
    wrapper.chmod(0o755)
    return {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "RECIPE": str(tmp_path / "recipe"),
        "HOOKS": str(tmp_path / "hooks"),
        "LOGS": str(tmp_path / "logs"),
        "SITE": str(tmp_path / "site"),
        "JITC": str(tmp_path / "jit"),
        "MODEL": str(tmp_path / "model"),
    }
