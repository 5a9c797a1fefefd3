"""Run bench/live/sweep.sh whole, by bash, on this machine, with stand-ins for the GPU's side.

Stand-in servers (fake_sglang.py) take the place of SGLang and a python3 wrapper that of the
model builder; the plan loader, the load generator, the turns, the greedy check, the server
lifecycle, the monitors and the report are the real ones. Used by tests/bench/test_sweep_sh.py
and by the host-timing checks of bench/checks (run by ``nox -s bench``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).with_name("fake_sglang.py")

PYTHON3 = """#!/usr/bin/env bash
# the device's python3, but for the model builder (the vocabulary only) and the server
case " $* " in
  *make_synth_models.py*) echo '{{"vocab": 32000}}'; exit 0 ;;
  *" -m sglang.launch_server "*)
    port=$(echo " $* " | sed -E 's/.* --port ([0-9]+) .*/\\1/')
    echo "args: $*"; echo "pythonpath: $PYTHONPATH"; echo "triton cache: $TRITON_CACHE_DIR"
    # a compile: a kernel every server meets, and one of this server's own
    mkdir -p "$TRITON_CACHE_DIR/SHARED" "$TRITON_CACHE_DIR/PORT$port"
    echo k > "$TRITON_CACHE_DIR/SHARED/kernel.cubin"; echo k > "$TRITON_CACHE_DIR/PORT$port/kernel.cubin"
    echo "max_total_num_tokens=32768, available_gpu_mem=${{FAKE_GPU_MEM_GB:-18.12}} GB"
    echo "The server is fired up and ready to roll!"
    exec {python} {fake} "$port" 0.0005 ;;
esac
exec {python} "$@"
"""

# what every stand-in plan ends with: the device's deadline (the estimate prices the device's
# start) and the folders of this run
STAND_IN_LIMITS_AND_PATHS = """\
[limits]
deadline_s = 570
ready_timeout_s = 60

[paths]
recipe = "{tmp}/recipe"
carry = "{tmp}/carry"
logs = "{tmp}/logs"
site = "{tmp}/site"
jit_cache = "{tmp}/jit"
"""

# A small plan: three servers (base and base+aa: the A/A pair) taking turns twice at two
# levels, short windows; the deadline is the device's (the estimate prices the device's start)
TURNS_PLAN = (
    """\
[servers]
list = ["base", "base+aa", "eagle3:high"]

[load]
concurrency = [2, 8]
warmup_s = 0.2
window_s = 0.3
windows = 2

[schedule]
reps = 2

"""
    + STAND_IN_LIMITS_AND_PATHS
)


def run_sweep(
    tmp_path: Path, plan: str = TURNS_PLAN, gc_warning: bool = True
) -> tuple[subprocess.CompletedProcess, Path]:
    """Run sweep.sh on ``plan`` (``{tmp}`` is ``tmp_path``); the finished process and $OUT.
    ``gc_warning``: the stand-in site's SGLang defines ``--gc-warning-threshold-secs`` (a field
    of its server arguments, as 0.5.9-0.5.19 write it)."""
    bin_dir, recipe, site, out = (tmp_path / d for d in ("bin", "recipe", "site", "out"))
    for d in (bin_dir, recipe, site):
        d.mkdir()
    (recipe / "site.tar.xz").write_bytes(b"")  # present; the site says it is unpacked already
    (site / ".ok").write_text("")
    if gc_warning:
        args = site / "sglang" / "srt" / "server_args.py"
        args.parent.mkdir(parents=True)
        args.write_text("class ServerArgs:\n    gc_warning_threshold_secs: float = 0.0\n")
    wrapper = bin_dir / "python3"
    wrapper.write_text(PYTHON3.format(python=sys.executable, fake=FAKE))
    wrapper.chmod(0o755)
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(plan.format(tmp=tmp_path))
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "OUT": str(out)}
    done = subprocess.run(
        ["bash", "bench/live/sweep.sh", str(plan_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    return done, out
