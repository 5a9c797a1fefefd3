#!/usr/bin/env python3
"""Build the carry for bench/live/probe_release.sh: SGLang 0.5.13 (and 0.5.12) live on the H200.

Releases 0.5.11-0.5.13 pin torch 2.11 like the device, but the 0.5.16 bundle
(.carry/live-sglang/site.tar.xz, ~50 MiB) plus a second sglang plus the repo is over the
64 MiB a device call may carry. So this builds a trimmed carry from the bundle's unpacked site
(``~/.cache/live-sglang/site``, written by ../shared/live-sglang/bundle.sh; else the bundle's
``site.tar.xz`` is unpacked to a temporary folder):

``.carry/probe013/`` (needed)
    ``base.tar.xz``       the bundle's site WITHOUT sglang 0.5.16, sglang-kernel 0.4.5 and jedi
                          (IPython only looks jedi up with find_spec; nothing imports it eagerly)
    ``kernel.tar.xz``     sglang-kernel 0.4.3 (0.5.13's pin; >= 0.5.12's 0.4.2.post2), trimmed like
                          the bundle trims 0.4.5 (sm90 op library; no FA3/flashmla/sm100/mscclpp),
                          plus ``_probe_libs/libnuma.so.1`` (0.4.3's op library needs it; the device
                          may lack it: the script adds it only when ldconfig does not know one)
    ``sglang-0.5.13.tar.xz``  the 0.5.13 wheel unpacked, trimmed like the bundle (no
                          multimodal_gen, test, native gRPC)
    ``hook013/``          ``sgtrace inject-hook --source sglang==0.5.13 --preset batch-size``
    ``load.py``, ``make_tiny_models.py``  the recipe's load driver and tiny-model builder
    ``MANIFEST.json``     versions, pins vs what is carried, flags checked, sizes
``.carry/probe012/`` (optional: leave it out of ``carry`` if the total is too big)
    ``sglang-0.5.12.tar.xz``, ``hook012/``

Kept from the 0.5.16 bundle although 0.5.13 pins other versions (mismatch risks, in MANIFEST):
flashinfer-python 0.6.14 (pin 0.6.12), apache-tvm-ffi 0.1.11 (0.1.9), sgl-deep-gemm 0.1.4.post1
(0.1.2), transformers 5.12.1 (5.8.1). A release's own wheels can be put ahead of the base with
``--overlay 0.5.13=transformers==5.8.1`` (written into the release's folder as
``overlay-<release>.tar.xz``, which probe_release.sh puts first on that release's PYTHONPATH).

Usage, from the repository root (pip reaches PyPI here; wheels are cached in ~/.cache/probe013):

    python bench/live/prepare_probe_release.py                 # 0.5.13 + 0.5.12
    python bench/live/prepare_probe_release.py --releases 0.5.13
    python bench/live/prepare_probe_release.py --hooks-only    # regenerate hook dirs only
    PYTHONPATH=src python bench/live/prepare_probe_release.py --releases 0.5.13 --hooks-only --plain

``--plain`` also writes, beside each ``hook<tag>``, the plain off state's check directories, hooks
with prepare_hook_check.py's policies ``plain_off`` (held off from the first decode result),
``plain_k2`` and ``plain_k7`` (forced toggles every 2 / 7 decode results):
``plain_off013``, ``plain_k2_013``, ``plain_k7_013`` (the server names probe_release.sh gives
them; ``SERVERS=plain`` runs them beside ``base013``).

``--releases 0.5.9`` writes ``.carry/probe009`` alone, with the stack of ``STACKS["0.5.9"]``
(the bundle's kernel, flashinfer 0.6.3 ahead, no deep_gemm, no xgrammar; see bench/live/README.md).

It ends by printing the device call's size in disk blocks (as the device counts it): the carry
folders plus the repo's files, against the 64 MiB limit; above it, it exits with an error.

Beside it: probe_wheels.py (download, unpack and pack wheels) and probe_archives.py (the base,
kernel and release archives, with the pins and flags each is checked for).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from probe_archives import (
    BUNDLE,
    build_base,
    build_bundle_kernel,
    build_kernel,
    build_release,
    open_bundle,
)
from probe_wheels import download, sh

LIMIT = 64 * 1024 * 1024
BLOCK = 4096  # the device counts the call's size in disk blocks, as `du -sk`
KERNEL = "0.4.3"


@dataclass(frozen=True)
class Stack:
    """What the first release's folder carries under it: the sglang-kernel (from the bundle when
    it is the bundle's version), wheels put ahead of the base for that release, and what more the
    base leaves out (glob patterns of the bundle site's top-level entries)."""

    kernel: str = KERNEL
    overlays: tuple[str, ...] = ()
    base_drop: tuple[str, ...] = ()


# SGLang 0.5.9 (pins torch 2.9.1, sgl-kernel 0.3.21, flashinfer 0.6.3): the bundle's kernel 0.4.5
# (what it got furthest with, through bench/live/sglang09_shim); flashinfer 0.6.3 ahead of the
# bundle's 0.6.14 (0.5.9's JIT rope kernel does not compile against 0.6.14's headers); no
# deep_gemm (0.5.9 turns it off on ImportError) and no xgrammar (imported lazily or under try,
# and --grammar-backend none): 0.5.9's carry fits the 64 MiB with both flashinfers.
STACKS = {
    "0.5.9": Stack(
        kernel=BUNDLE["sglang-kernel"],
        overlays=("flashinfer_python==0.6.3",),
        base_drop=("deep_gemm", "sgl_deep_gemm-*.dist-info", "xgrammar", "xgrammar-*.dist-info"),
    ),
}
# --plain: these entries of prepare_hook_check.PLAIN_POLICIES, one hook directory each
PLAIN_RUN = ("plain_off", "plain_k2", "plain_k7")


def plain_hook_name(policy: str, tag: str) -> str:
    """The directory (and server) name of a plain policy on a release: ``plain_off`` + ``013`` ->
    ``plain_off013``; ``plain_k2`` + ``013`` -> ``plain_k2_013`` (the two numbers kept apart)."""
    return f"{policy}_{tag}" if policy[-1].isdigit() else f"{policy}{tag}"


def plain_hook_args(policies: dict[str, dict[str, object]], tag: str) -> dict[str, list[str]]:
    """``inject-hook`` flags per plain hook directory of release ``tag``: each key of the policy
    as ``--set KEY=VALUE`` (inject-hook merges them over the preset exactly as
    prepare_hook_check.py's ``load_policy_config(None, overrides)``)."""

    def text(value: object) -> str:
        return str(value).lower() if isinstance(value, bool) else str(value)

    return {
        plain_hook_name(name, tag): [
            a for key, value in policies[name].items() for a in ("--set", f"{key}={text(value)}")
        ]
        for name in PLAIN_RUN
    }


def make_hook(repo: Path, release: str, out: Path, flags: list[str]) -> None:
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(repo / "src")}
    code = "import sys; from sgtrace.cli import main; sys.argv = ['sgtrace'] + sys.argv[1:]; main()"
    cmd = [sys.executable, "-c", code, "inject-hook", "--source", f"sglang=={release}"]
    try:
        sh([*cmd, "-o", str(out), *flags], env=env)
    except subprocess.CalledProcessError:
        sys.exit(f"inject-hook refused {out.name} (sglang {release}): its message is above")
    cfg = json.loads((out / "sgtrace_hook.json").read_text())
    off_state = cfg.get("options", {}).get("off_state")
    print(
        f"  {out.name} ({release}): family {cfg.get('family')}, off_state {off_state}, plain "
        f"names {'mapped' if cfg.get('plain_off_names') else 'NONE'}"
    )
    if off_state != "plain" or not cfg.get("plain_off_names"):
        sys.exit(f"{out}: generated without the plain off state; see {out}/sgtrace_hook.json")


def plain_policies() -> dict[str, dict[str, object]]:
    """prepare_hook_check.py's table (imported here only: it needs sgtrace on the path)."""
    try:
        from prepare_hook_check import PLAIN_POLICIES
    except ModuleNotFoundError as exc:
        sys.exit(f"--plain reads prepare_hook_check.py's policies ({exc}): run with PYTHONPATH=src")
    return PLAIN_POLICIES


def copy_recipe(root: Path, dest: Path) -> None:
    common = subprocess.run(  # the main checkout, when root is a worktree of it
        ["git", "-C", str(root), "rev-parse", "--path-format=absolute", "--git-common-dir"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    main = Path(common).parent if common else root
    for f in ["load.py", "make_tiny_models.py"]:
        for cand in [
            root / ".carry/live-sglang" / f,
            root.parent / "shared/live-sglang" / f,
            main / ".carry/live-sglang" / f,
            main.parent / "shared/live-sglang" / f,
        ]:
            if cand.exists():
                shutil.copy(cand, dest / f)
                (dest / f).chmod(0o644)
                break
        else:
            sys.exit(f"recipe script {f} not found")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=None, help="repo root (default: git toplevel)")
    ap.add_argument(
        "--releases",
        nargs="+",
        default=["0.5.13", "0.5.12"],
        help="the first goes to .carry/probe0XY with the base stack (0.5.13: probe013, 0.5.9: "
        "probe009), any other to its own .carry/probe0XY",
    )
    ap.add_argument(
        "--kernel", default=None, help=f"sglang-kernel version to carry (default {KERNEL})"
    )
    ap.add_argument("--bundle-site", type=Path, default=Path.home() / ".cache/live-sglang/site")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache/probe013")
    ap.add_argument("--preset", default="batch-size", help="inject-hook --preset")
    ap.add_argument(
        "--overlay",
        action="append",
        default=[],
        help="RELEASE=NAME==VERSION: carry this wheel ahead of the base for RELEASE",
    )
    ap.add_argument("--hooks-only", action="store_true")
    ap.add_argument(
        "--plain",
        action="store_true",
        help="also write the plain off state's hook directories: "
        + ", ".join(plain_hook_name(p, "013") for p in PLAIN_RUN)
        + " (per release)",
    )
    a = ap.parse_args()
    root = a.root or Path(
        subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    repo = Path(__file__).resolve().parents[2]  # the checkout holding this script (sgtrace src)
    tag = {r: r.split(".")[-1].zfill(3) for r in a.releases}  # 0.5.13 -> 013, 0.5.9 -> 009
    dirs = {r: root / f".carry/probe{tag[r]}" for r in a.releases}
    main_dir = dirs[a.releases[0]]
    stack = STACKS.get(a.releases[0], Stack())
    kernel = a.kernel or stack.kernel
    for r in a.releases:
        dirs[r].mkdir(parents=True, exist_ok=True)
    ex = root / ".git/info/exclude"
    if ex.is_file() and "/.carry/" not in ex.read_text().split():
        with open(ex, "a") as fh:
            fh.write("/.carry/\n")

    print("== hook directories (sgtrace inject-hook --mode runtime)")
    for r in a.releases:
        make_hook(repo, r, dirs[r] / f"hook{tag[r]}", ["--preset", a.preset])
    if a.plain:
        print("== plain off state check directories (prepare_hook_check.py's policies)")
        for r in a.releases:
            for name, flags in plain_hook_args(plain_policies(), tag[r]).items():
                make_hook(repo, r, dirs[r] / name, flags)
    if a.hooks_only:
        report_size(root, [dirs[r] for r in a.releases])
        return
    wheels = a.cache / "wheels"
    manifest: dict = {"releases": {}, "kernel": kernel, "bundle": BUNDLE}
    site, tmp = open_bundle(root, a.bundle_site)
    print(f"== base: the bundle's site without sglang, sglang-kernel, jedi {stack.base_drop}")
    manifest.update(build_base(site, main_dir / "base.tar.xz", stack.base_drop))
    if kernel == BUNDLE["sglang-kernel"]:
        print(f"== sglang-kernel {kernel}, the bundle's")
        manifest.update(build_bundle_kernel(site, main_dir / "kernel.tar.xz"))
    else:
        print(f"== sglang-kernel {kernel}, trimmed")
        kwhl = download(f"sglang-kernel=={kernel}", wheels)
        manifest.update(build_kernel(kwhl, main_dir / "kernel.tar.xz"))
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    for r in a.releases:
        print(f"== sglang {r}")
        overlays = [o.split("=", 1)[1] for o in a.overlay if o.split("=", 1)[0] == r]
        if r == a.releases[0]:
            overlays = [*stack.overlays, *overlays]
        manifest["releases"][r] = build_release(r, dirs[r], wheels, kernel, overlays)
        manifest["releases"][r]["folder"] = str(dirs[r].relative_to(root))
    print("== recipe scripts")
    copy_recipe(root, main_dir)
    (main_dir / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    report_size(root, [dirs[r] for r in a.releases])


def blocks(path: Path) -> int:
    """Bytes ``path`` takes as the device counts them (``du -sk``): every file rounded up to
    4 KiB, and 4 KiB a directory."""
    if path.is_file():
        return -(-path.stat().st_size // BLOCK) * BLOCK
    return BLOCK + sum(blocks(p) for p in path.iterdir()) if path.is_dir() else 0


def git_files(root: Path, *flags: str) -> list[Path]:
    out = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", *flags], capture_output=True, check=True
    ).stdout.split(b"\0")
    return [root / f.decode() for f in out if f]


def report_size(root: Path, folders: list[Path]) -> None:
    """Print the device call's size (tracked and untracked-not-ignored files, each carry folder),
    in disk blocks as the device measures it; exit 1 above 64 MiB."""
    tracked = sum(blocks(f) for f in git_files(root) if f.is_file())
    extra = sum(blocks(f) for f in git_files(root, "--others", "--exclude-standard") if f.is_file())
    sizes = {str(d.relative_to(root)): blocks(d) for d in folders}
    total = tracked + extra + sum(sizes.values())
    print("== size of the device call (disk blocks, as `du -sk`)")
    print(
        f"  repo tracked {tracked / 2**20:.2f} MiB, untracked-not-ignored {extra / 2**20:.2f} MiB"
    )
    for k, v in sizes.items():
        print(f"  {k}: {v / 2**20:.2f} MiB")
    jit = folders[0] / "jitcache.tgz"  # an earlier call's JIT cache, put there by hand
    jit_size = blocks(jit)
    first = tracked + extra + sizes[str(folders[0].relative_to(root))]
    print(f"  total {total / 2**20:.2f} MiB of 64 MiB")
    if len(folders) > 1:
        print(f"  without the optional folder(s): {first / 2**20:.2f} MiB")
    if jit_size:
        print(f"  without them and {jit.name}: {(first - jit_size) / 2**20:.2f} MiB")
    if total > LIMIT:
        advice = ["leave the optional folder(s) out of carry"] if len(folders) > 1 else []
        if jit_size:
            advice.append(
                f"move {jit.relative_to(root)} ({jit_size / 2**20:.2f} MiB) out of the folder "
                "(the servers then compile their kernels at start-up)"
            )
        sys.exit(f"TOO BIG for one device call: {'; '.join(advice or ['carry less'])}")


if __name__ == "__main__":
    main()
