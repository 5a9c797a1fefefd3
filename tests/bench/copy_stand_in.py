"""The GPU side of copy_check.sh and storm.sh, stood in for on this machine: a python3 wrapper
whose model builder checks that its site is on its PYTHONPATH and writes only ``models.json``
(the rule's offset, from its options as the real builder derives it), and whose
``sglang.launch_server`` is the copy-check stand-in server. Before it serves, the server does
what the real one would fail at: sglang and sgl_kernel must be found on its PYTHONPATH and each
flag must be one that sglang defines (else it exits 2, as argparse does); it echoes its
arguments, PYTHONPATH and forced-retraction switch, the release's own start-up lines, one hook
switch line, and answers as the copy model of that offset. The carry is the recipe's bundle
(present, already unpacked) or a probe carry (real archives, unpacked by the script), with hook
directories (the payload in the first only, as ``--share-payload`` leaves it)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.bench.test_copy_check import STAND_IN
from tests.bench.test_probe_release import tar_xz

PYTHON3 = """#!/usr/bin/env bash
case " $* " in
  *make_copy_model.py*)  # models.json only: D from --offset, else --draft-lag + 1, else 2
    {python} {check} model || exit 1
    echo "builder: $*" >> "$2.args"
    lag=$(echo " $* " | sed -nE 's/.* --draft-lag ([0-9]+) .*/\\1/p')
    offset=$(echo " $* " | sed -nE 's/.* --offset ([0-9]+) .*/\\1/p')
    [ -n "$offset" ] || offset=$(( ${{lag:-1}} + 1 ))
    mkdir -p "$2" && printf '{{"offset": %s, "vocab": 4096}}\\n' "$offset" > "$2/models.json"
    echo '{{"rule": "stand-in"}}'; exit 0 ;;
  *" -m sglang.launch_server "*)
    {python} {check} server "$@" || exit 2
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

# what the model builder and the server need from their PYTHONPATH, looked up as Python would
CHECK = r"""
import importlib.util, os, sys
from pathlib import Path
path = [Path(p).resolve() for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
def located(name):
    spec = importlib.util.find_spec(name)
    where = spec and spec.origin and Path(spec.origin).resolve()
    if not where or not any(where.is_relative_to(p) for p in path):
        sys.exit(f"ModuleNotFoundError: No module named {name!r} on PYTHONPATH {path}")
    return where.parent
if sys.argv[1] == "model":
    located("transformers")
    sys.exit(0)
sglang = located("sglang")
located("sgl_kernel")
text = "".join(p.read_text() for p in [sglang / "srt/server_args.py",
                                        *sorted((sglang / "srt/arg_groups").glob("*.py"))])
unknown = [a for a in sys.argv[2:] if a.startswith("--")
           and f'"{a}"' not in text and a[2:].replace("-", "_") not in text]
if unknown:
    sys.exit("launch_server.py: error: unrecognized arguments: " + " ".join(unknown))
start = sglang / "stand_in_start.log"
print(start.read_text() if start.exists() else "", end="")
"""

# the flags copy_check.sh and storm.sh pass, as SGLang releases define them: 0.5.16 from
# ServerArgs' fields (a flag is its field's name), 0.5.13 by argparse, where the prefill CUDA
# graph goes off with --disable-piecewise-cuda-graph (0.5.13's server_args.py, checked)
FIELDS = ("model_path", "attention_backend", "host", "port", "mem_fraction_static",
          "max_running_requests", "cuda_graph_max_bs", "sampling_backend", "grammar_backend",
          "log_level", "sleep_on_idle", "max_total_tokens", "schedule_conservativeness",
          "speculative_algorithm", "speculative_draft_model_path", "speculative_num_steps",
          "speculative_eagle_topk", "speculative_num_draft_tokens")  # fmt: skip
SERVER_ARGS_0_5_16 = "class ServerArgs:\n" + "".join(
    f"    {f}: object = None\n" for f in (*FIELDS, "disable_prefill_cuda_graph")
)
SERVER_ARGS_0_5_13 = "".join(
    f'parser.add_argument("--{f.replace("_", "-")}")\n'
    for f in (*FIELDS, "disable_piecewise_cuda_graph")
)
# 0.5.13's start-up, in the probe carry: its optional Responses API fails to import (no fault)
START_0_5_13 = (
    "[2026-12-04 06:30:06] Can not initialize OpenAIServingResponses, error: Traceback (most "
    "recent call last):\nModuleNotFoundError: No module named 'openai_harmony'\n"
)


def write_tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def stand_in(tmp_path: Path, hooks: tuple[str, ...]) -> dict[str, str]:
    """Lay out the stand-ins under ``tmp_path``; the environment the scripts run with."""
    for d in ("bin", "recipe"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "recipe" / "site.tar.xz").write_bytes(b"")
    write_tree(
        tmp_path / "site",
        {
            ".ok": "",
            "sglang/__init__.py": "",
            "sglang/srt/server_args.py": SERVER_ARGS_0_5_16,
            "sgl_kernel/__init__.py": "",
            "transformers/__init__.py": "",
        },
    )
    for k, hook in enumerate(hooks):
        (tmp_path / "hooks" / hook).mkdir(parents=True)
        (tmp_path / "hooks" / hook / "sgtrace_hook.json").write_text("{}")
        if k == 0:
            (tmp_path / "hooks" / hook / "sgtrace_payload").mkdir()
            (tmp_path / "hooks" / hook / "sitecustomize.py").write_text("# the payload's\n")
    server, check = tmp_path / "stand_in.py", tmp_path / "stand_in_check.py"
    server.write_text(STAND_IN)
    check.write_text(CHECK)
    wrapper = tmp_path / "bin" / "python3"
    wrapper.write_text(PYTHON3.format(python=sys.executable, server=server, check=check))
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


def probe_carry(tmp_path: Path, hooks: tuple[str, ...]) -> dict[str, str]:
    """The stand-ins with a probe carry of SGLang 0.5.13 instead of the bundle, as
    prepare_probe_release.py writes it (base, sglang-kernel and release archives, here holding
    what the stand-ins look for) with the hook directories inside it (``plain-check``); nothing
    unpacked yet."""
    env = stand_in(tmp_path, hooks)
    carry = tmp_path / "probe013"
    carry.mkdir()
    (tmp_path / "hooks").rename(carry / "plain-check")
    tar_xz(carry / "base.tar.xz", {"transformers/__init__.py": ""})
    tar_xz(carry / "kernel.tar.xz", {"sgl_kernel/__init__.py": ""})
    release = {
        "sglang/__init__.py": "",
        "sglang/srt/server_args.py": SERVER_ARGS_0_5_13,
        "sglang/stand_in_start.log": START_0_5_13,
        "sglang-0.5.13.dist-info/METADATA": "Version: 0.5.13\n",
    }
    tar_xz(carry / "sglang-0.5.13.tar.xz", release)
    return {
        **env,
        "RECIPE": str(carry),
        "HOOKS": str(carry / "plain-check"),
        "SITE": str(tmp_path / "site-probe"),
        "SG": str(tmp_path / "sg"),
        "OV": str(tmp_path / "ov"),
        "JITC": str(tmp_path / "jit-probe"),
    }
