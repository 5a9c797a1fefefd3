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

It ends by printing the device call's size: the carry folders plus the repo's tracked files,
against the 64 MiB limit.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

LIMIT = 64 * 1024 * 1024
KERNEL = "0.4.3"
PLATFORMS = [
    "manylinux_2_34_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
]
# what the bundle carries for the packages a release pins (bundle.sh's PKGS)
BUNDLE = {
    "sglang-kernel": "0.4.5",
    "flashinfer_python": "0.6.14",
    "apache-tvm-ffi": "0.1.11",
    "sgl-deep-gemm": "0.1.4.post1",
    "transformers": "5.12.1",
    "tokenizers": "0.22.2",
    "xgrammar": "0.2.1",
    "torch": "2.11.0 (device)",
}
# server flags probe_release.sh passes (without --disable-prefill-cuda-graph: 0.5.12/0.5.13
# do not have it)
FLAGS = [
    "--model-path",
    "--attention-backend",
    "--host",
    "--mem-fraction-static",
    "--max-running-requests",
    "--cuda-graph-max-bs",
    "--sampling-backend",
    "--grammar-backend",
    "--max-total-tokens",
    "--log-level",
    "--sleep-on-idle",
    "--port",
    "--disable-cuda-graph",
    "--speculative-algorithm",
    "--speculative-draft-model-path",
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
]


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kw)


def download(spec: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    name, version = spec.split("==")
    norm = re.sub(r"[-_.]+", "_", name).lower()
    for w in dest.glob("*.whl"):
        parts = w.name.split("-")
        if re.sub(r"[-_.]+", "_", parts[0]).lower() == norm and parts[1] == version:
            return w
    plat = [a for p in PLATFORMS for a in ("--platform", p)]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            *plat,
            "-d",
            str(dest),
            spec,
        ],
        capture_output=True,
        text=True,
    )
    if out.returncode:
        sys.exit(f"pip download {spec} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return download(spec, dest)


def unpack_wheel(whl: Path, dest: Path) -> None:
    """As bundle.sh: .data/purelib|platlib to the root, other .data dropped, modes kept."""
    with zipfile.ZipFile(whl) as z:
        for info in z.infolist():
            parts = info.filename.split("/")
            if parts[0].endswith(".data"):
                if len(parts) > 2 and parts[1] in ("purelib", "platlib"):
                    parts = parts[2:]
                else:
                    continue
            if info.filename.endswith("/"):
                continue
            target = dest.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                target.chmod(mode)


def requires(whl: Path) -> dict[str, str]:
    with zipfile.ZipFile(whl) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    pins = {}
    for line in text.splitlines():
        m = re.match(r"Requires-Dist: ([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*([=<>!~][^;]*)?", line)
        if m and "extra ==" not in line:
            pins[m.group(1).lower().replace("_", "-")] = (m.group(2) or "").strip()
    return pins


def pack(src: Path, out: Path, members: list[str] | None = None, exclude: list[str] = ()) -> int:
    """tar | xz -T0 -6 (as bundle.sh); returns the archive's size."""
    out.unlink(missing_ok=True)
    cmd = ["tar", "-C", str(src), "--exclude=__pycache__"]
    cmd += [f"--exclude=./{e}" for e in exclude] + ["-cf", "-"] + (members or ["."])
    with open(out, "wb") as fh:
        tar = subprocess.Popen(cmd, stdout=subprocess.PIPE)
        xz = subprocess.run(["xz", "-T0", "-6"], stdin=tar.stdout, stdout=fh, check=True)
        tar.stdout.close()
        if tar.wait() or xz.returncode:
            sys.exit(f"packing {out} failed")
    return out.stat().st_size


def trim_sglang(site: Path) -> None:
    """bundle.sh's trim of the sglang package (not on the LLM server path)."""
    for so in (site / "sglang/srt/grpc").glob("_core*.so"):
        so.unlink()
    for d in ("sglang/multimodal_gen", "sglang/test"):
        shutil.rmtree(site / d, ignore_errors=True)


def flags_missing(site: Path) -> list[str]:
    text = "".join(
        p.read_text(errors="ignore")
        for p in [
            site / "sglang/srt/server_args.py",
            *sorted((site / "sglang/srt/arg_groups").glob("*.py")),
        ]
        if p.exists()
    )
    return [f for f in FLAGS if f'"{f}"' not in text and f"'{f}'" not in text]


def find_libnuma() -> Path | None:
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "libnuma.so.1 " in line and "x86-64" in line:
            return Path(line.split("=>")[-1].strip()).resolve()
    return None


def make_hook(repo: Path, release: str, out: Path, preset: str) -> None:
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(repo / "src")}
    code = "import sys; from sgtrace.cli import main; sys.argv = ['sgtrace'] + sys.argv[1:]; main()"
    sh(
        [
            sys.executable,
            "-c",
            code,
            "inject-hook",
            "--source",
            f"sglang=={release}",
            "-o",
            str(out),
            "--preset",
            preset,
        ],
        env=env,
    )
    cfg = json.loads((out / "sgtrace_hook.json").read_text())
    print(f"  hook {release}: family {cfg.get('family')}, can_switch {cfg.get('can_switch')}")


def build_base(root: Path, bundle_site: Path, out: Path) -> dict:
    """The bundle's site without sglang, sglang-kernel and jedi, packed to ``out``."""
    site, tmp = bundle_site, None
    if not (site / "sglang").is_dir():
        tarball = root / ".carry/live-sglang/site.tar.xz"
        if not tarball.exists():
            sys.exit(
                f"no bundle: neither {site} nor {tarball} (run ../shared/live-sglang/bundle.sh)"
            )
        tmp = Path(tempfile.mkdtemp(prefix="probe013-site-"))
        sh(["bash", "-c", f"xz -T0 -dc '{tarball}' | tar -C '{tmp}' -xf -"])
        site = tmp
    drop = ["sglang", "sgl_kernel", "triton_kernels", "tools", "jedi"]
    for pattern in ("sglang-*.dist-info", "sglang_kernel-*.dist-info", "jedi-*.dist-info"):
        drop += [p.name for p in site.glob(pattern)]
    members = sorted(p.name for p in site.iterdir() if p.name not in drop)
    size = pack(site, out, members)
    print(f"  {out.name} {size / 2**20:.1f} MiB ({len(members)} entries)")
    dists = sorted(
        p.name[: -len(".dist-info")] for p in site.glob("*.dist-info") if p.name not in drop
    )
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"base_dropped": drop, "base_dists": dists}


def build_kernel(whl: Path, out: Path) -> dict:
    """sglang-kernel trimmed as bundle.sh trims it, plus libnuma.so.1, packed to ``out``."""
    with tempfile.TemporaryDirectory(prefix="probe013-kernel-") as kd:
        kd = Path(kd)
        unpack_wheel(whl, kd)
        sk = kd / "sgl_kernel"
        for f in [
            sk / "flash_ops.abi3.so",
            sk / "flashmla_ops.abi3.so",
            *sk.glob("infllm_ops*.so"),
            *kd.glob("_mscclpp*.so"),
        ]:
            f.unlink(missing_ok=True)
        for extra in [sk / "sm100", kd / "lib", kd / "lib64", kd / "include"]:
            shutil.rmtree(extra, ignore_errors=True)
        if not (sk / "sm90/common_ops.abi3.so").exists():
            sys.exit("sglang-kernel wheel has no sm90/common_ops.abi3.so")
        numa = find_libnuma()
        if numa:
            (kd / "_probe_libs").mkdir()
            shutil.copy2(numa, kd / "_probe_libs/libnuma.so.1")
        else:
            print("  WARNING: no libnuma.so.1 here to carry; the device must have one")
        needed = subprocess.run(
            [
                "bash",
                "-c",
                f"readelf -d '{sk}/sm90/common_ops.abi3.so' | "
                "sed -n 's/.*NEEDED.*\\[\\(.*\\)\\]/\\1/p'",
            ],
            capture_output=True,
            text=True,
        ).stdout.split()
        size = pack(kd, out)
    print(f"  {out.name} {size / 2**20:.1f} MiB; op library needs {' '.join(needed)}")
    return {"kernel_needed": needed, "kernel_libnuma_carried": bool(numa)}


def build_release(
    release: str, folder: Path, wheels: Path, kernel: str, overlays: list[str]
) -> dict:
    """sglang RELEASE unpacked and trimmed (+ an optional overlay of other wheels), packed."""
    whl = download(f"sglang=={release}", wheels)
    pins = requires(whl)
    with tempfile.TemporaryDirectory(prefix=f"probe013-{release}-") as sd:
        sd = Path(sd)
        unpack_wheel(whl, sd)
        trim_sglang(sd)
        missing = flags_missing(sd)
        size = pack(sd, folder / f"sglang-{release}.tar.xz")
    watch = [
        "torch",
        "sglang-kernel",
        "flashinfer-python",
        "apache-tvm-ffi",
        "sgl-deep-gemm",
        "transformers",
        "xgrammar",
    ]
    pinned = {k: pins.get(k, "") for k in watch}
    carried = {
        k: kernel
        if k == "sglang-kernel"
        else BUNDLE.get(k.replace("flashinfer-python", "flashinfer_python"), "?")
        for k in watch
    }
    mism = {
        k: {"pin": pinned[k], "carried": carried[k]}
        for k in watch
        if pinned[k].lstrip("=") != carried[k].split(" ")[0]
    }
    overlay = folder / f"overlay-{release}.tar.xz"
    overlay.unlink(missing_ok=True)
    if overlays:
        with tempfile.TemporaryDirectory(prefix=f"probe013-ov-{release}-") as od:
            for spec in overlays:
                unpack_wheel(download(spec, wheels), Path(od))
            osize = pack(Path(od), overlay)
        print(f"  {overlay.name} {osize / 2**20:.1f} MiB: {' '.join(overlays)}")
    print(f"  sglang-{release}.tar.xz {size / 2**20:.1f} MiB; flags missing: {missing or 'none'}")
    for k, v in mism.items():
        print(f"  pin differs: {k} {v['pin']} (carried {v['carried']})")
    return {
        "wheel": whl.name,
        "archive_bytes": size,
        "pins": pinned,
        "mismatch": mism,
        "flags_missing": missing,
        "overlays": overlays,
    }


def copy_recipe(root: Path, dest: Path) -> None:
    for f in ["load.py", "make_tiny_models.py"]:
        for cand in [
            root / ".carry/live-sglang" / f,
            root.parent / "shared/live-sglang" / f,
            Path("/work/shared/live-sglang") / f,
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
        help="the first goes to .carry/probe013, any other to .carry/probe0XY",
    )
    ap.add_argument("--kernel", default=KERNEL, help="sglang-kernel version to carry")
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
    a = ap.parse_args()
    root = a.root or Path(
        subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    repo = Path(__file__).resolve().parents[2]  # the checkout holding this script (sgtrace src)
    main_dir = root / ".carry/probe013"
    tag = {r: r.split(".")[-1].zfill(3) for r in a.releases}  # 0.5.13 -> 013, 0.5.12 -> 012
    dirs = {
        r: (main_dir if i == 0 else root / f".carry/probe{tag[r]}")
        for i, r in enumerate(a.releases)
    }
    for r in a.releases:
        dirs[r].mkdir(parents=True, exist_ok=True)
    ex = root / ".git/info/exclude"
    if ex.is_file() and "/.carry/" not in ex.read_text().split():
        with open(ex, "a") as fh:
            fh.write("/.carry/\n")

    print("== hook directories (sgtrace inject-hook --mode runtime)")
    for r in a.releases:
        make_hook(repo, r, dirs[r] / f"hook{tag[r]}", a.preset)
    if a.hooks_only:
        report_size(root, [dirs[r] for r in a.releases])
        return
    wheels = a.cache / "wheels"
    manifest: dict = {"releases": {}, "kernel": a.kernel, "bundle": BUNDLE}
    print("== base: the bundle's site without sglang, sglang-kernel, jedi")
    manifest.update(build_base(root, a.bundle_site, main_dir / "base.tar.xz"))
    print(f"== sglang-kernel {a.kernel}, trimmed")
    kwhl = download(f"sglang-kernel=={a.kernel}", wheels)
    manifest.update(build_kernel(kwhl, main_dir / "kernel.tar.xz"))
    for r in a.releases:
        print(f"== sglang {r}")
        overlays = [o.split("=", 1)[1] for o in a.overlay if o.split("=", 1)[0] == r]
        manifest["releases"][r] = build_release(r, dirs[r], wheels, a.kernel, overlays)
        manifest["releases"][r]["folder"] = str(dirs[r].relative_to(root))
    print("== recipe scripts")
    copy_recipe(root, main_dir)
    (main_dir / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    report_size(root, [dirs[r] for r in a.releases])


def report_size(root: Path, folders: list[Path]) -> None:
    files = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True
    ).stdout.split(b"\0")
    tracked = sum(
        (root / f.decode()).stat().st_size for f in files if f and (root / f.decode()).is_file()
    )
    untracked = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--others", "--exclude-standard"],
        capture_output=True,
    ).stdout.split(b"\0")
    extra = sum(
        (root / f.decode()).stat().st_size for f in untracked if f and (root / f.decode()).is_file()
    )
    sizes = {
        str(d.relative_to(root)): sum(p.stat().st_size for p in d.rglob("*") if p.is_file())
        for d in folders
    }
    total = tracked + extra + sum(sizes.values())
    print("== size of the device call")
    print(
        f"  repo tracked {tracked / 2**20:.2f} MiB, untracked-not-ignored {extra / 2**20:.2f} MiB"
    )
    for k, v in sizes.items():
        print(f"  {k}: {v / 2**20:.2f} MiB")
    print(
        f"  total {total / 2**20:.2f} MiB of 64 MiB"
        + ("" if total < LIMIT else "  TOO BIG: leave the optional folder out of carry")
    )
    if len(folders) > 1:
        first = tracked + extra + sizes[str(folders[0].relative_to(root))]
        print(f"  without the optional folder(s): {first / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()
