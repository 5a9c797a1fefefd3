"""Where the analysed source comes from: a directory, a PyPI release, or the installed package.

``--source`` takes one of three forms, shared by every static command:

* a directory that holds a package (``/src`` containing ``sglang/``), or the package folder;
* ``NAME==X.Y.Z``: that release's wheel, downloaded from PyPI without dependencies, unpacked
  into a per-user cache and reused afterwards (an offline re-run works);
* nothing: the installed ``sglang`` distribution, located through its metadata, never imported.

>>> tree = SourceTree(Path("/src"), ("sglang",), "dir:/src")
>>> tree.label
'dir:/src'
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sgtrace.errors import SourceError

# Downloads, unpacking and the installed package's metadata import their modules where used:
# most runs read a folder that is already there, and those imports cost a tenth of a warm run.

RELEASE = re.compile(r"^(?P<name>[A-Za-z0-9_.\-]+)==(?P<version>[A-Za-z0-9_.+\-!]+)$")
DEFAULT_PACKAGE = "sglang"

# Downloads one wheel of `name==version` into a folder; returns the wheel's path.
WheelFetcher = Callable[[str, str, Path], Path]


@dataclass(frozen=True)
class SourceTree:
    """A folder of Python source and the top-level packages in it that are analysed."""

    root: Path
    packages: tuple[str, ...]
    label: str

    def relative(self, path: Path) -> str:
        """``path`` relative to the root, with ``/`` separators."""
        return path.resolve().relative_to(self.root.resolve()).as_posix()


def default_cache_dir() -> Path:
    """The per-user cache: ``$XDG_CACHE_HOME/sgtrace`` or ``~/.cache/sgtrace``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sgtrace"


def pip_fetch_wheel(name: str, version: str, dest: Path) -> Path:
    """Download the wheel of ``name==version`` with pip, without dependencies."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "-q",
        "-d",
        str(dest),
        f"{name}=={version}",
    ]
    import subprocess

    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise SourceError(
            f"could not download {name}=={version} from PyPI: {tail or 'no wheel'}; check the "
            "version exists (pip index versions " + name + ") and that PyPI is reachable, or "
            "pass a directory with --source"
        )
    return wheels[0]


def open_source(
    spec: str | Path | None,
    cache_dir: Path | None = None,
    fetch: WheelFetcher = pip_fetch_wheel,
) -> SourceTree:
    """The :class:`SourceTree` that ``spec`` names (see the module docstring)."""
    if spec is None:
        return _installed(DEFAULT_PACKAGE)
    text = str(spec)
    match = RELEASE.match(text)
    if match and not Path(text).exists():
        return _release(match["name"], match["version"], cache_dir or default_cache_dir(), fetch)
    return _directory(Path(text))


def _directory(path: Path) -> SourceTree:
    if not path.is_dir():
        raise SourceError(
            f"source {str(path)!r} is not a directory; pass a folder that contains a package, "
            "sglang==X.Y.Z for a release from PyPI, or nothing for the installed sglang"
        )
    path = path.resolve()
    if (path / "__init__.py").is_file():
        return SourceTree(path.parent, (path.name,), f"dir:{path}")
    packages = tuple(
        sorted(
            p.name if p.is_dir() else p.stem
            for p in path.iterdir()
            if (p.is_dir() and any(p.glob("**/*.py")) and p.name.isidentifier())
            or (p.suffix == ".py" and p.stem.isidentifier())
        )
    )
    if not packages:
        raise SourceError(f"no Python package or module in {path}; pass the folder above one")
    return SourceTree(path, packages, f"dir:{path}")


def _installed(name: str) -> SourceTree:
    import importlib.metadata

    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise SourceError(
            f"{name} is not installed in this Python ({sys.executable}); analyse a release "
            f"without installing it: --source {name}==X.Y.Z (for example {name}==0.5.9), "
            "or pass a directory with --source"
        ) from None
    package_dir = Path(str(dist.locate_file(name)))
    if not package_dir.is_dir():
        raise SourceError(f"{name} {dist.version} is installed but {package_dir} is missing")
    return SourceTree(package_dir.parent, (name,), f"{name}=={dist.version} (installed)")


def _release(name: str, version: str, cache_dir: Path, fetch: WheelFetcher) -> SourceTree:
    package = name.replace("-", "_")
    target = cache_dir / "sources" / f"{package}-{version}"
    label = f"{name}=={version}"
    if (target / ".complete").is_file():
        return SourceTree(target, _packages_in(target), label)
    import shutil
    import tempfile

    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".download-") as tmp:
        wheel = fetch(name, version, Path(tmp))
        staging = Path(tmp) / "tree"
        _unpack_python(wheel, staging)
        (staging / ".complete").write_text(label + "\n", encoding="utf-8")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            staging.rename(target)
        except OSError:
            if not (target / ".complete").is_file():  # not a concurrent winner: stale folder
                shutil.rmtree(target, ignore_errors=True)
                staging.rename(target)
    return SourceTree(target, _packages_in(target), label)


def _unpack_python(wheel: Path, dest: Path) -> None:
    import zipfile

    try:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                top = member.split("/", 1)[0]
                if member.endswith(".py") and ".dist-info" not in top and ".data" not in top:
                    archive.extract(member, dest)
    except zipfile.BadZipFile as exc:
        raise SourceError(
            f"{wheel.name} is not a valid wheel ({exc}); delete it and retry"
        ) from exc


def _packages_in(root: Path) -> tuple[str, ...]:
    return tuple(sorted(p.name for p in root.iterdir() if p.is_dir() and p.name.isidentifier()))
