"""bench/live/device_env.sh, the device calls' shell helpers, run by bash with stand-ins for the
GPU's tools: where a server's host side is pinned, and to which CPUs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ENV_SH = Path(__file__).resolve().parents[2] / "bench" / "live" / "device_env.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def fake_tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/usr/bin/env bash\n" + body + "\n")
    path.chmod(0o755)


def run(tmp_path: Path, script: str, **env: str) -> str:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    full = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "OUT": str(out),
        "T0": "0",
        **env,
    }
    done = subprocess.run(
        ["bash", "-c", f". {ENV_SH}; {script}"],
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


@pytest.fixture
def bin_dir(tmp_path):
    path = tmp_path / "bin"
    path.mkdir()
    return path


def test_the_gpu_local_cpus_come_from_sysfs_by_the_gpus_bus_id(tmp_path, bin_dir):
    fake_tool(bin_dir, "nvidia-smi", 'echo "00000000:9A:00.0"')
    device = tmp_path / "sys" / "bus" / "pci" / "devices" / "0000:9a:00.0"
    device.mkdir(parents=True)
    (device / "local_cpulist").write_text("8-15,24-31\n")
    got = run(tmp_path, "gpu_local_cpus", SYSFS=str(tmp_path / "sys"))
    assert got.strip() == "8-15,24-31"


def test_no_gpu_local_cpus_where_sysfs_does_not_know_the_gpu(tmp_path, bin_dir):
    fake_tool(bin_dir, "nvidia-smi", 'echo "00000000:9A:00.0"')
    assert run(tmp_path, "gpu_local_cpus || true", SYSFS=str(tmp_path / "none")) == ""


@pytest.mark.skipif(shutil.which("taskset") is None, reason="needs taskset (util-linux)")
def test_a_server_starts_on_the_cpus_named_for_it(tmp_path, bin_dir):
    # python3 stands in for the server: it prints the CPUs it may run on and its environment
    fake_tool(bin_dir, "python3", 'echo "args: $*"; taskset -pc $$; echo "FOO=${FOO:-}"')
    cpu = sorted(os.sched_getaffinity(0))[0]
    log_pinned, log_free = tmp_path / "pinned.log", tmp_path / "free.log"
    run(
        tmp_path,
        f"CPUS[a]={cpu}; start_server a {log_pinned} /x FOO=1 -- --port 1; "
        f"start_server b {log_free} /y -- --port 2; wait",
    )
    pinned, free = log_pinned.read_text(), log_free.read_text()
    assert "args: -m sglang.launch_server --port 1" in pinned and "FOO=1" in pinned
    assert pinned.splitlines()[1].endswith(f"affinity list: {cpu}")
    everywhere = (
        subprocess.run(
            ["taskset", "-pc", str(os.getpid())], capture_output=True, text=True, check=True
        )
        .stdout.split(": ")[-1]
        .strip()
    )
    assert free.splitlines()[1].split(": ")[-1] == everywhere


@pytest.mark.parametrize(
    ("server_args", "flag"),
    [
        ("disable_prefill_cuda_graph: bool = False\n", "--disable-prefill-cuda-graph"),  # 0.5.16
        (
            'parser.add_argument("--disable-piecewise-cuda-graph")\n',  # 0.5.10-0.5.13
            "--disable-piecewise-cuda-graph",
        ),
        ('parser.add_argument("--enable-piecewise-cuda-graph")\n', ""),  # 0.5.9: opt-in
    ],
)
def test_the_prefill_graph_goes_off_with_the_flag_the_release_defines(tmp_path, server_args, flag):
    (tmp_path / "sglang" / "srt").mkdir(parents=True)
    (tmp_path / "sglang" / "srt" / "server_args.py").write_text(server_args)
    assert run(tmp_path, f"prefill_graph_off {tmp_path}").strip() == flag
