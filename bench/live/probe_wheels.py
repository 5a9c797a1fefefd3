"""Wheels for the probe carry (prepare_probe_release.py): download one for the device's Python
and platform, unpack it as bundle.sh does, read its pins, pack a folder as tar.xz."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

PLATFORMS = [
    "manylinux_2_34_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
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
    """tar | xz -T0 -9e; returns the archive's size. Slower than bundle.sh's -6 (2-3 minutes
    for the 257 MiB base on two cores) and 8% smaller: probe013's base 29.3 MB instead of 31.9,
    room for copy_check.sh's hook directories beside it in one 64 MiB call."""
    out.unlink(missing_ok=True)
    cmd = ["tar", "-C", str(src), "--exclude=__pycache__"]
    cmd += [f"--exclude=./{e}" for e in exclude] + ["-cf", "-"] + (members or ["."])
    with open(out, "wb") as fh:
        tar = subprocess.Popen(cmd, stdout=subprocess.PIPE)
        xz = subprocess.run(["xz", "-T0", "-9e"], stdin=tar.stdout, stdout=fh, check=True)
        tar.stdout.close()
        if tar.wait() or xz.returncode:
            sys.exit(f"packing {out} failed")
    return out.stat().st_size
