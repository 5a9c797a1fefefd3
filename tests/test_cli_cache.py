"""``--cache-dir`` and ``--no-cache`` reach the hook commands, on a real SGLang release.

The release is found in the given cache directory (a link to the test cache's unpacked tree,
so nothing is downloaded), and the parsed summaries go there, never to the default cache;
``--no-cache`` writes no summaries at all.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sgtrace.cli import main
from sgtrace.graphs.source import SourceTree

pytestmark = pytest.mark.network

RELEASE = "0.5.16"


@pytest.fixture
def cache_dir(
    tmp_path: Path,
    sglang_source: Callable[[str], SourceTree],
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    """A cache directory holding the release (linked), with the default cache moved away."""
    tree = sglang_source(RELEASE)
    cache = tmp_path / "cache"
    (cache / "sources").mkdir(parents=True)
    (cache / "sources" / tree.root.name).symlink_to(tree.root, target_is_directory=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "default"))
    return cache


def summaries(cache: Path) -> list[Path]:
    return sorted((cache / "summaries").rglob("*.pkl"))


def run(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result


def test_inject_hook_keeps_its_summaries_in_the_cache_dir(cache_dir: Path, tmp_path: Path) -> None:
    source = ("--source", f"sglang=={RELEASE}", "--cache-dir", str(cache_dir))
    run("inject-hook", *source, "-o", str(tmp_path / "hook"))
    assert summaries(cache_dir) != []
    assert not (tmp_path / "default").exists()


def test_inject_hook_no_cache_writes_no_summaries(cache_dir: Path, tmp_path: Path) -> None:
    source = ("--source", f"sglang=={RELEASE}", "--cache-dir", str(cache_dir), "--no-cache")
    run("inject-hook", *source, "--mode", "patch")
    assert summaries(cache_dir) == []
    assert not (tmp_path / "default").exists()


def test_launch_keeps_its_summaries_in_the_cache_dir(cache_dir: Path, tmp_path: Path) -> None:
    source = ("--source", f"sglang=={RELEASE}", "--cache-dir", str(cache_dir))
    with pytest.raises(SystemExit) as exited:  # launch exits with the command's status
        main.main(
            ["launch", *source, "-o", str(tmp_path / "hook"), "--", sys.executable, "-c", ""],
            standalone_mode=False,
        )
    assert exited.value.code == 0
    assert summaries(cache_dir) != []
    assert (tmp_path / "hook" / "sgtrace_hook.json").is_file()
    assert not (tmp_path / "default").exists()
