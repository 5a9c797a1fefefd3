"""SGLang 0.5.9 in probe_release.sh, without a GPU: the 0.5.9 carry's stack (kernel, flashinfer
0.6.3 ahead, what the base leaves out), the call's size in disk blocks, the compatibility shim
(sgl_kernel stubs, register_fake, the PyTorch rope), both 0.5.9 variants' server lines, and the
report for a server that stopped at a kernel compile."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.bench.test_live_sweep import script
from tests.bench.test_probe_release import LIVE, SCRIPTS, load_report, tar_xz

SHIM = LIVE / "sglang09_shim"


def test_the_0_5_9_stack_carries_its_flashinfer_and_the_bundles_kernel() -> None:
    prepare = script("prepare_probe_release")
    stack = prepare.STACKS["0.5.9"]
    assert stack.kernel == prepare.BUNDLE["sglang-kernel"] == "0.4.5"
    assert stack.overlays == ("flashinfer_python==0.6.3",)
    assert {"deep_gemm", "xgrammar"} <= set(stack.base_drop)
    assert prepare.STACKS.get("0.5.13", prepare.Stack()) == prepare.Stack(kernel="0.4.3")
    assert prepare.plain_hook_name("plain_k2", "009") == "plain_k2_009"


def test_the_size_is_counted_in_disk_blocks(tmp_path: Path) -> None:
    prepare = script("prepare_probe_release")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "one").write_bytes(b"x")
    (tmp_path / "d" / "two").write_bytes(b"x" * 4097)
    assert prepare.blocks(tmp_path / "d") == 4096 * (1 + 1 + 2)  # the folder, 1 B, 4097 B


FAKES = {  # just enough of torch, sgl_kernel and sglang for the shim to patch
    "torch/__init__.py": "",
    "torch/library.py": (
        "def register_fake(op, func=None, /):\n"
        "    if op.startswith('sgl_kernel::gone'):\n"
        "        raise RuntimeError(f'operator {op} does not exist')\n"
        "    return func if func is not None else (lambda f: f)\n"
    ),
    "sgl_kernel/__init__.py": "def present():\n    return 'present'\n",
    "sglang/__init__.py": "",
    "sglang/jit_kernel/__init__.py": "",
    "sglang/jit_kernel/rope.py": "def apply_rope_with_cos_sin_cache_inplace(*a, **k):\n    pass\n",
}
CHECK = """\
import torch.library
from sgl_kernel import present, awq_marlin_moe_repack
assert present() == "present"
try:
    awq_marlin_moe_repack(1)
except NotImplementedError as e:
    print("stub:", e)
f = torch.library.register_fake("sgl_kernel::gone", lambda: 1)
print("register_fake skipped:", f())
from sglang.jit_kernel.rope import apply_rope_with_cos_sin_cache_inplace as rope
print("rope:", rope.__module__, rope.__name__)
"""


@pytest.mark.parametrize("rope", ["torch", ""])
def test_the_shim_stubs_missing_kernel_names_and_swaps_the_rope(tmp_path: Path, rope: str) -> None:
    for name, text in FAKES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": f"{SHIM}:{tmp_path}", "SGTRACE_PROBE_ROPE": rope}
    done = subprocess.run(
        [sys.executable, "-c", CHECK], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    swapped = (
        ("sitecustomize", "rope_torch")
        if rope
        else ("sglang.jit_kernel.rope", "apply_rope_with_cos_sin_cache_inplace")
    )
    assert done.stdout.splitlines() == [
        "stub: sgl_kernel.awq_marlin_moe_repack missing in this kernel build",
        "register_fake skipped: 1",
        f"rope: {swapped[0]} {swapped[1]}",
    ]
    assert ("sglang09-shim: rope -> torch" in done.stderr) == bool(rope)


def make_probe009(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "repo"
    live = root / "bench" / "live"
    live.mkdir(parents=True)
    for name in SCRIPTS:
        shutil.copy(LIVE / name, live / name)
    carry = root / ".carry" / "probe009"
    for hook in ["hook009", "plain_off009", "plain_k2_009"]:
        (carry / hook).mkdir(parents=True)
        (carry / hook / "sgtrace_hook.json").write_text("{}")
    tar_xz(carry / "base.tar.xz", {"base.txt": "base"})
    tar_xz(carry / "kernel.tar.xz", {"sgl_kernel/version.py": '__version__ = "0.4.5"\n'})
    tar_xz(carry / "sglang-0.5.9.tar.xz", {"sglang-0.5.9.dist-info/METADATA": "Version: 0.5.9\n"})
    tar_xz(carry / "overlay-0.5.9.tar.xz", {"flashinfer/__init__.py": ""})
    (carry / "load.py").write_text("")
    (carry / "make_tiny_models.py").write_text("")
    env = {
        **os.environ,
        "OUT": str(tmp_path / "out"),
        **{k: str(tmp_path / k.lower()) for k in ("SITE", "SG", "OV", "JITC", "TINY", "LOGS")},
        "DRY": "1",
    }
    return root, env


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_dry_run_of_0_5_9_launches_both_variants_with_the_shim(tmp_path: Path) -> None:
    root, env = make_probe009(tmp_path)
    servers = "base009 eagle009 plain_off009 plain_k2_009 eaglet09 plain_k2_t09"
    done = subprocess.run(
        ["bash", "bench/live/probe_release.sh"],
        cwd=root,
        env={**env, "SERVERS": servers},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [x for x in done.stdout.splitlines() if "sglang.launch_server" in x]
    paths = [x.split("=", 1)[1].split(" ")[0] for x in lines]
    shim, sg, ov = f"{root}/bench/live/sglang09_shim", f"{tmp_path}/sg009", f"{tmp_path}/ov009"
    tail = f"{sg}:{tmp_path}/site"
    hook = f"{root}/.carry/probe009"
    assert paths == [
        f"{shim}:{ov}:{tail}",
        f"{shim}:{ov}:{tail}",
        f"{hook}/plain_off009:{shim}:{ov}:{tail}",
        f"{hook}/plain_k2_009:{shim}:{ov}:{tail}",
        f"{shim}:{tail}",  # t09: no flashinfer 0.6.3, the PyTorch rope
        f"{hook}/plain_k2_009:{shim}:{tail}",
    ]
    v2 = "SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK=1 SGLANG_ENABLE_SPEC_V2=1"
    assert all(f" {v2} " in x for x in lines)
    assert ["SGTRACE_PROBE_ROPE=torch" in x for x in lines] == [False] * 4 + [True] * 2
    assert ["--speculative-algorithm EAGLE3" in x for x in lines] == [False] + [True] * 5


COMPILE_FAILED = """\
[2026-12-04 06:00:00] server_args=ServerArgs(model_path='/tmp/tiny-probe/target')
[2026-12-04 06:00:40 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/tmp/sg009/sglang/srt/model_executor/cuda_graph_runner.py", line 400, in capture
    self.capture_one()
  File "/tmp/sg009/sglang/jit_kernel/utils.py", line 90, in load_jit
    return load_inline(...)
RuntimeError: Error building extension 'apply_rope_pos_ids_cos_sin_cache'
/tmp/ov009/flashinfer/data/include/flashinfer/fastdiv.cuh(39): error: qualified name is not allowed
1 error detected in the compilation of "rope.cu".
[2026-12-04 06:00:41] Received sigquit from a child process. It usually means the child failed.
"""


def test_the_report_shows_a_compile_error_and_compares_a_variant_with_its_releases_base() -> None:
    report = load_report()
    stopped = report.where_it_stopped(COMPILE_FAILED.splitlines())
    assert stopped["exception"] == (
        "RuntimeError: Error building extension 'apply_rope_pos_ids_cos_sin_cache'"
    )
    assert stopped["error_lines"] == [
        "/tmp/ov009/flashinfer/data/include/flashinfer/fastdiv.cuh(39): error: qualified name "
        "is not allowed"
    ]
    assert stopped["traceback_tail"][-2].startswith("1 error detected")
    ready = {
        "base009": {"kind": "base", "release": "0.5.9"},
        "eaglet09": {"kind": "eagle", "release": "0.5.9"},
        "eagle013": {"kind": "eagle", "release": "0.5.13"},
    }
    assert [report.reference(n, ready) for n in ready] == ["base009", "base009", "base013"]
