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

import errno
import functools
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sgtrace.errors import SourceError
from sgtrace.graphs.download import Progress, no_progress, pip_fetch_wheel

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
        """``path`` relative to the root, with ``/`` separators: as written first (a file of a
        symlinked subpackage lies under the root only through the link), then resolved."""
        root = self.root.resolve()
        try:
            return Path(os.path.abspath(path)).relative_to(root).as_posix()
        except ValueError:
            return path.resolve().relative_to(root).as_posix()

    def folder(self, path: Path) -> str:
        """The directory ``path`` as a prefix of the files under it, relative to the root
        (``""`` for the root itself; ``"/"``, which prefixes nothing, outside the tree)."""
        try:
            rel = self.relative(path)
        except ValueError:
            return "/"
        return "" if rel == "." else rel + "/"


@dataclass(frozen=True)
class SkippedFile:
    """A file or folder of the tree that is left out, and why (one warning each).

    >>> str(SkippedFile("app/pipe.py", "a FIFO (named pipe), not a regular file"))
    'app/pipe.py: a FIFO (named pipe), not a regular file'
    """

    rel: str
    reason: str

    def __str__(self) -> str:
        return f"{self.rel}: {self.reason}"


@dataclass(frozen=True)
class Listing:
    """The ``.py`` files of a tree's packages (relative to its root, ``/``-separated, in the
    order of sorted paths) and what was left out of them."""

    files: tuple[str, ...]
    skipped: tuple[SkippedFile, ...]


def list_python_files(tree: SourceTree) -> Listing:
    """Every readable regular ``.py`` file of ``tree``'s packages, never opening one.

    FIFOs, sockets and devices named ``*.py``, dangling symlinks, symlink loops and unreadable
    files or folders are left out, each with a :class:`SkippedFile`. Symlinked subpackages are
    followed, as Python's import would, and their modules named by the link's path (a folder
    linked under two names is listed under both); a link back to a folder above it, a loop, is
    left out and reported.
    """
    files: list[str] = []
    skipped: list[SkippedFile] = []
    for package in tree.packages:
        top = tree.root / package
        if top.is_dir():
            entries = _walk(tree.root, package, frozenset({os.path.realpath(top)}))
        else:
            entries = _check(tree.root, f"{package}.py")
        for rel, problem in entries:
            if problem is None:
                files.append(rel)
            else:
                skipped.append(SkippedFile(rel, problem))
    files.sort(key=lambda rel: rel.split("/"))
    return Listing(tuple(files), tuple(sorted(skipped, key=lambda s: s.rel.split("/"))))


# A listed path and, when it is left out, why.
Entry = tuple[str, "str | None"]


def _walk(root: Path, rel: str, above: frozenset[str]) -> Iterator[Entry]:
    """The entries under ``root/rel``; ``above`` holds the real paths of the folders walked
    down to it, itself included (a link back to one of them is a loop)."""
    try:
        with os.scandir(root / rel) as found:
            children = sorted(found, key=lambda entry: entry.name)
    except OSError as exc:
        yield rel + "/", f"folder not listed ({exc.strerror}), its modules left out"
        return
    for entry in children:
        path = f"{rel}/{entry.name}"
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(root, path, above | {os.path.realpath(entry.path)})
        elif entry.is_symlink():
            yield from _link(root, path, above)
        elif not entry.name.endswith(".py"):
            continue
        elif entry.is_file(follow_symlinks=False):  # from the folder listing: no stat
            yield path, _unreadable(root / path)
        else:
            yield from _check(root, path)


def _link(root: Path, rel: str, above: frozenset[str]) -> Iterator[Entry]:
    """A symlink in a package: a module, a subpackage to follow, or a broken link."""
    name = rel.rsplit("/", 1)[-1]
    if name.endswith(".py") or not (root / rel).is_dir():
        if name.endswith(".py") or (name.isidentifier() and not (root / rel).exists()):
            yield from _check(root, rel)  # a module, or a link that may have been a subpackage
        return
    real = os.path.realpath(root / rel)
    if real in above:
        yield (
            rel + "/",
            f"a symlink loop (-> {os.readlink(root / rel)}, a folder above it), left out",
        )
        return
    yield from _walk(root, rel, above | {real})


def _check(root: Path, rel: str) -> Iterator[Entry]:
    """``rel`` as a module file, or why it cannot be one."""
    path = root / rel
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if not path.is_symlink():
            yield rel, f"could not be read ({exc.strerror}), left out"
        else:
            broken = "a symlink loop" if exc.errno == errno.ELOOP else "a dangling symlink"
            yield rel, f"{broken} (-> {os.readlink(path)}), left out"
        return
    if stat.S_ISFIFO(mode):
        yield rel, "a FIFO (named pipe), not a regular file, left out"
    elif not stat.S_ISREG(mode):
        yield rel, "not a regular file (a socket or device), left out"
    else:
        yield rel, _unreadable(path)


def _unreadable(path: Path) -> str | None:
    """Why the regular file ``path`` cannot be read, or ``None`` (a permission check, not a
    read: opening each of a release's thousands of files would slow every run)."""
    if os.access(path, os.R_OK):
        return None
    return "unreadable (permission denied), left out; check its mode and owner"


def default_cache_dir() -> Path:
    """The per-user cache: ``$XDG_CACHE_HOME/sgtrace`` or ``~/.cache/sgtrace``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sgtrace"


def open_source(
    spec: str | Path | None,
    cache_dir: Path | None = None,
    fetch: WheelFetcher | None = None,
    progress: Progress = no_progress,
) -> SourceTree:
    """The :class:`SourceTree` that ``spec`` names (see the module docstring); a download
    reports to ``progress`` when it starts, while it runs, and when it is unpacked."""
    if spec is None:
        return _installed(DEFAULT_PACKAGE)
    text = str(spec)
    match = RELEASE.match(text)
    if match and not Path(text).exists():
        if fetch is None:
            fetch = functools.partial(pip_fetch_wheel, progress=progress)
        cache = cache_dir or default_cache_dir()
        return _release(match["name"], match["version"], cache, fetch, progress)
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
            if (p.is_dir() and p.name.isidentifier() and _holds_python(path, p.name))
            or (p.suffix == ".py" and p.stem.isidentifier())
        )
    )
    if not packages:
        raise SourceError(f"no Python package or module in {path}; pass the folder above one")
    return SourceTree(path, packages, f"dir:{path}")


def _holds_python(root: Path, package: str) -> bool:
    """Whether ``root/package`` holds a module file (listed lazily: the first one answers)."""
    entries = _walk(root, package, frozenset({os.path.realpath(root / package)}))
    return any(problem is None for _, problem in entries)


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


def _release(
    name: str, version: str, cache_dir: Path, fetch: WheelFetcher, progress: Progress
) -> SourceTree:
    package = name.replace("-", "_")
    target = cache_dir / "sources" / f"{package}-{version}"
    label = f"{name}=={version}"
    if (target / ".complete").is_file():
        return SourceTree(target, _packages_in(target), label)
    import shutil
    import tempfile

    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".download-") as tmp:
        progress(f"downloading {label} from PyPI (once: later runs read {target})")
        wheel = fetch(name, version, Path(tmp))
        progress(f"unpacking {wheel.name} ({wheel.stat().st_size / 1e6:.1f} MB)")
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
