"""bench/live/repack_bundle.sh: the bundle's site repacked smaller, the same tar byte for byte,
and a missing bundle refused before anything is written."""

from __future__ import annotations

import hashlib
import lzma
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "live" / "repack_bundle.sh"
pytestmark = pytest.mark.skipif(
    shutil.which("bash") is None or shutil.which("xz") is None, reason="needs bash and xz"
)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_the_site_is_repacked_smaller_and_unpacks_to_the_same_tar(tmp_path: Path) -> None:
    tar = b"".join(b"line %d of a site's files\n" % (i % 977) for i in range(40000))
    bundle = tmp_path / "site.tar.xz"
    bundle.write_bytes(lzma.compress(tar, preset=0))  # the fastest level: -9e does better
    before = bundle.stat().st_size
    done = run(str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert bundle.stat().st_size < before
    assert lzma.decompress(bundle.read_bytes()) == tar
    assert hashlib.sha256(tar).hexdigest() in done.stdout
    again = run(str(tmp_path))  # nothing left to gain: the file stays as it is
    assert again.returncode == 0 and "left as it was" in again.stdout


def test_a_missing_bundle_is_refused_with_what_to_run(tmp_path: Path) -> None:
    done = run(str(tmp_path))
    assert done.returncode == 2
    assert "run bash ../shared/live-sglang/bundle.sh first" in done.stderr
    assert list(tmp_path.iterdir()) == []
