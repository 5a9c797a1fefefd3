"""Download one release's wheel from PyPI with pip, reporting progress and failures in a line.

pip's own messages are not shown: a missing release makes pip list every version ever published
on one line. :func:`pip_fetch_wheel` turns that into which release is missing, the newest
releases and the ones nearest the request, and what to try. While pip runs, ``progress`` hears
every :data:`HEARTBEAT_S` seconds that it still does (the CLI prints that on stderr).

>>> nearest_versions("0.5.30", ["0.5.9", "0.5.23", "0.5.22", "0.4.0"], 2)
['0.5.23', '0.5.22']
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from sgtrace.errors import SourceError

HEARTBEAT_S = 10.0
Progress = Callable[[str], None]  # hears one line of progress at a time

_FROM_VERSIONS = re.compile(r"\(from versions: ([^)]*)\)")


def no_progress(message: str) -> None:
    """A :data:`Progress` that drops every message."""


def pip_fetch_wheel(
    name: str,
    version: str,
    dest: Path,
    progress: Progress = no_progress,
    heartbeat_s: float = HEARTBEAT_S,
) -> Path:
    """Download the wheel of ``name==version`` into ``dest`` with pip, without dependencies;
    ``progress`` hears every ``heartbeat_s`` seconds that pip still runs."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    cmd += ["--disable-pip-version-check", "-q", "-d", str(dest), f"{name}=={version}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    waited = 0.0
    while True:
        try:
            out, err = proc.communicate(timeout=heartbeat_s)
            break
        except subprocess.TimeoutExpired:
            waited += heartbeat_s
            progress(f"still downloading {name}=={version} ({waited:.0f} s)")
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        raise SourceError(download_failure(name, version, err or out))
    return wheels[0]


def download_failure(name: str, version: str, pip_output: str) -> str:
    """One line for a failed ``pip download``: the release is missing (with the versions that
    exist), or pip's last error and what to try."""
    found = _FROM_VERSIONS.search(pip_output)
    if found is not None:
        versions = [v.strip() for v in found.group(1).split(",") if v.strip() != "none"]
        if not versions:
            return (
                f"pip found no release of {name} at all: the name is wrong or the package "
                f"index is unreachable; check pip download --no-deps {name}=={version}, or "
                "pass a directory with --source"
            )
        newest = sorted(versions, key=version_key)[-3:][::-1]
        near = [v for v in nearest_versions(version, versions, 3) if v not in newest]
        hint = f"the newest are {', '.join(newest)}" + (
            f"; the nearest {', '.join(near)}" if near else ""
        )
        return (
            f"{name} {version} does not exist on the package index ({_releases(len(versions))}; "
            f"{hint}); try --source {name}=={newest[0]}"
        )
    errors = [line for line in pip_output.splitlines() if line.startswith("ERROR:")]
    last = (errors or pip_output.strip().splitlines() or ["no wheel and no message"])[-1]
    return (
        f"could not download {name}=={version} with pip ({last.removeprefix('ERROR: ')[:200]}); "
        f"check that PyPI is reachable (pip download --no-deps {name}=={version}), or pass a "
        "directory with --source"
    )


def _releases(count: int) -> str:
    return f"{count} release" + ("" if count == 1 else "s")


def version_key(version: str) -> tuple[tuple[int, str], ...]:
    """A sort key for release numbers: numbers compare as numbers (``0.5.10`` after ``0.5.9``),
    and a suffix such as ``.post1`` after its release."""
    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in re.split(r"[.\-+]", version))


def nearest_versions(version: str, versions: Sequence[str], count: int) -> list[str]:
    """The ``count`` releases in ``versions`` closest to ``version`` in release order."""
    ordered = sorted({*versions, version}, key=version_key)
    at = ordered.index(version)
    around = sorted(
        (v for v in ordered if v != version),
        key=lambda v: (abs(ordered.index(v) - at), ordered.index(v) < at),
    )
    return sorted(around[:count], key=version_key, reverse=True)
