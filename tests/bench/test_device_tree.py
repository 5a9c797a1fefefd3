"""bench/live/device_tree.sh: the stored results' archives leave the working tree for device
calls and come back from git; nothing uncommitted is lost either way."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "live" / "device_tree.sh"
pytestmark = pytest.mark.skipif(
    shutil.which("bash") is None or shutil.which("git") is None, reason="needs bash and git"
)


def run(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], cwd=repo, capture_output=True, text=True, timeout=60
    )


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    results = tmp_path / "bench" / "results"
    (results / "live" / "call1").mkdir(parents=True)
    (results / "img").mkdir()
    (results / "live" / "call1" / "servers.tgz").write_bytes(b"\x1f\x8b" + b"x" * 5000)
    (results / "img" / "plot.svg").write_text("<svg/>\n")
    (results / "README.md").write_text("the results\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "results")
    return tmp_path


def test_slim_leaves_the_archives_out_and_back_restores_them(repo: Path) -> None:
    before = run(repo, "size")
    assert before.returncode == 0 and "of 67108864" in before.stdout
    archive = repo / "bench" / "results" / "live" / "call1" / "servers.tgz"
    svg = repo / "bench" / "results" / "img" / "plot.svg"
    notes = repo / "bench" / "results" / "README.md"
    notes.write_text("edited, not committed\n")  # a tracked file that is no archive
    new = repo / "bench" / "results" / "live" / "call2"
    new.mkdir()
    (new / "servers.tgz").write_bytes(b"new call")  # untracked: a call not stored yet
    slim = run(repo, "slim")
    assert slim.returncode == 0, slim.stderr
    assert not archive.exists() and not svg.exists() and (new / "servers.tgz").exists()
    smaller = run(repo, "size")
    assert int(smaller.stdout.split()[2]) < int(before.stdout.split()[2]) - 4000
    back = run(repo, "back")
    assert back.returncode == 0 and "restored 2 files" in back.stdout, back.stdout
    assert archive.read_bytes().startswith(b"\x1f\x8b") and svg.read_text() == "<svg/>\n"
    assert notes.read_text() == "edited, not committed\n"  # back restores the archives only


def test_slim_refuses_while_an_archive_differs_from_git(repo: Path) -> None:
    svg = repo / "bench" / "results" / "img" / "plot.svg"
    svg.write_text("<svg>redrawn</svg>\n")
    slim = run(repo, "slim")
    assert slim.returncode == 1 and "commit them first" in slim.stderr
    assert svg.read_text() == "<svg>redrawn</svg>\n"
    assert run(repo, "nonsense").returncode == 2
