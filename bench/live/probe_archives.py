"""The archives of the probe carry (prepare_probe_release.py): the 0.5.16 bundle's site without
sglang, the trimmed sglang-kernel, and one SGLang release with its pins checked against what is
carried and the server flags probe_release.sh passes checked against its server_args."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from probe_wheels import download, pack, requires, sh, unpack_wheel

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


def open_bundle(root: Path, bundle_site: Path) -> tuple[Path, Path | None]:
    """The bundle's unpacked site: ``bundle_site`` if it holds one, else ``site.tar.xz`` unpacked
    to a temporary folder (returned second, for the caller to remove)."""
    if (bundle_site / "sglang").is_dir():
        return bundle_site, None
    tarball = root / ".carry/live-sglang/site.tar.xz"
    if not tarball.exists():
        sys.exit(
            f"no bundle: neither {bundle_site} nor {tarball} (run ../shared/live-sglang/bundle.sh)"
        )
    tmp = Path(tempfile.mkdtemp(prefix="probe013-site-"))
    sh(["bash", "-c", f"xz -T0 -dc '{tarball}' | tar -C '{tmp}' -xf -"])
    return tmp, tmp


# the bundle's sglang-kernel 0.4.5 (its top-level entries; bundle.sh trimmed it already)
KERNEL_ENTRIES = ("sgl_kernel", "triton_kernels", "sglang_kernel-*.dist-info")


def build_base(site: Path, out: Path, extra_drop: tuple[str, ...] = ()) -> dict:
    """The bundle's site without sglang, sglang-kernel, jedi and ``extra_drop`` (glob patterns
    of top-level entries), packed to ``out``."""
    drop = ["sglang", "tools", "jedi"]
    for pattern in ("sglang-*.dist-info", "jedi-*.dist-info", *KERNEL_ENTRIES, *extra_drop):
        drop += [p.name for p in site.glob(pattern)]
    members = sorted(p.name for p in site.iterdir() if p.name not in drop)
    size = pack(site, out, members)
    print(f"  {out.name} {size / 2**20:.1f} MiB ({len(members)} entries)")
    dists = sorted(
        p.name[: -len(".dist-info")] for p in site.glob("*.dist-info") if p.name not in drop
    )
    return {"base_dropped": sorted(set(drop)), "base_dists": dists}


def build_bundle_kernel(site: Path, out: Path) -> dict:
    """The bundle's own sglang-kernel (0.4.5, trimmed by bundle.sh), packed to ``out``: what
    SGLang 0.5.9 got furthest with (its 0.3.21 pin is not built for torch 2.11)."""
    members = sorted(p.name for pattern in KERNEL_ENTRIES for p in site.glob(pattern))
    if not (site / "sgl_kernel/sm90/common_ops.abi3.so").exists():
        sys.exit(f"{site}: the bundle has no sgl_kernel/sm90/common_ops.abi3.so")
    size = pack(site, out, members)
    print(f"  {out.name} {size / 2**20:.1f} MiB (the bundle's: {' '.join(members)})")
    return {"kernel_needed": [], "kernel_libnuma_carried": False, "kernel_from": "bundle"}


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
    for spec in overlays:  # a wheel carried ahead of the base replaces the base's
        name, version = spec.split("==")
        key = name.lower().replace("_", "-")
        if key in carried:
            carried[key] = version
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
