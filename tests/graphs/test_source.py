"""``--source`` forms: a directory, ``NAME==X.Y.Z`` (fetched once, then reused offline), or the
installed package. The release form is driven by a fake fetcher serving a wheel built here."""

from __future__ import annotations

import importlib.metadata
import os
import sys
import zipfile
from pathlib import Path

import pytest

from sgtrace.errors import SourceError
from sgtrace.graphs import source as source_module
from sgtrace.graphs.build import Project
from sgtrace.graphs.find import find_name
from sgtrace.graphs.source import Listing, SkippedFile, SourceTree, list_python_files, open_source

WHEEL_FILES = {
    "fakepkg/__init__.py": "from fakepkg.core import run\n",
    "fakepkg/core.py": "def run():\n    return helper()\n\n\ndef helper():\n    return 1\n",
    "fakepkg/data/table.json": "{}\n",
    "fakepkg-1.2.3.dist-info/METADATA": "Name: fakepkg\nVersion: 1.2.3\n",
    "fakepkg-1.2.3.dist-info/hook.py": "print('not source')\n",
    "fakepkg-1.2.3.data/scripts/tool.py": "print('not source')\n",
}


def build_wheel(folder: Path) -> Path:
    wheel = folder / "fakepkg-1.2.3-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in WHEEL_FILES.items():
            archive.writestr(name, text)
    return wheel


class FakeFetcher:
    """A :data:`~sgtrace.graphs.source.WheelFetcher` that copies a prepared file and counts."""

    def __init__(self, wheel: Path | None) -> None:
        self.wheel = wheel
        self.calls: list[tuple[str, str]] = []

    def __call__(self, name: str, version: str, dest: Path) -> Path:
        self.calls.append((name, version))
        if self.wheel is None:
            raise SourceError(f"offline: cannot download {name}=={version}")
        target = dest / self.wheel.name
        target.write_bytes(self.wheel.read_bytes())
        return target


def files_under(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


# -- directories -------------------------------------------------------------------------------
def make_package(root: Path) -> Path:
    package = root / "app"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "sub" / "mod.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    return package


def test_directory_holding_a_package(tmp_path: Path) -> None:
    make_package(tmp_path)
    (tmp_path / "tool.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("no python here\n", encoding="utf-8")
    (tmp_path / "not-an-identifier").mkdir()
    (tmp_path / "not-an-identifier" / "x.py").write_text("", encoding="utf-8")
    root = tmp_path.resolve()
    assert open_source(tmp_path) == SourceTree(root, ("app", "tool"), f"dir:{root}")
    assert open_source(str(tmp_path)) == open_source(tmp_path)


def test_package_folder_itself(tmp_path: Path) -> None:
    package = make_package(tmp_path)
    root = tmp_path.resolve()
    assert open_source(package) == SourceTree(root, ("app",), f"dir:{package.resolve()}")


def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(SourceError) as excinfo:
        open_source(missing)
    assert str(excinfo.value) == (
        f"source {str(missing)!r} is not a directory; pass a folder that contains a package, "
        "sglang==X.Y.Z for a release from PyPI, or nothing for the installed sglang"
    )


def test_directory_without_python(tmp_path: Path) -> None:
    (tmp_path / "readme.txt").write_text("hello\n", encoding="utf-8")
    with pytest.raises(SourceError) as excinfo:
        open_source(tmp_path)
    assert str(excinfo.value) == (
        f"no Python package or module in {tmp_path.resolve()}; pass the folder above one"
    )


def test_listing_follows_symlinked_subpackages_and_names_what_it_leaves_out(
    tmp_path: Path,
) -> None:
    make_package(tmp_path / "src")
    app = tmp_path / "src" / "app"
    plugin = tmp_path / "elsewhere"
    plugin.mkdir()
    (plugin / "ext.py").write_text("x = 1\n", encoding="utf-8")
    (app / "plugin").symlink_to(plugin, target_is_directory=True)
    (app / "alias").symlink_to(app / "sub", target_is_directory=True)
    (app / "gone.py").symlink_to("missing.py")
    (app / "notes").symlink_to("missing-folder")  # may have been a subpackage: reported
    (app / "data.txt").symlink_to("missing.txt")  # not Python: ignored
    os.mkfifo(app / "sub" / "pipe.py")
    (app / "sub" / "back").symlink_to(app, target_is_directory=True)
    loop = f"a symlink loop (-> {app}, a folder above it)"
    fifo = "a FIFO (named pipe), not a regular file, left out"
    # a folder linked under a second name is listed under both, as Python imports both
    assert list_python_files(open_source(tmp_path / "src")) == Listing(
        ("app/__init__.py", "app/alias/mod.py", "app/plugin/ext.py", "app/sub/mod.py"),
        (
            SkippedFile("app/alias/back/", f"{loop}, left out"),
            SkippedFile("app/alias/pipe.py", fifo),
            SkippedFile("app/gone.py", "a dangling symlink (-> missing.py), left out"),
            SkippedFile("app/notes", "a dangling symlink (-> missing-folder), left out"),
            SkippedFile("app/sub/back/", f"{loop}, left out"),
            SkippedFile("app/sub/pipe.py", fifo),
        ),
    )


# -- releases ----------------------------------------------------------------------------------
def test_release_is_fetched_once_then_reused_offline(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    online = FakeFetcher(build_wheel(tmp_path))
    first = open_source("fakepkg==1.2.3", cache, fetch=online)
    assert online.calls == [("fakepkg", "1.2.3")]
    target = cache / "sources" / "fakepkg-1.2.3"
    assert first == SourceTree(target, ("fakepkg",), "fakepkg==1.2.3")
    # only Python source outside .dist-info/.data is unpacked, plus the completion marker
    assert files_under(target) == [".complete", "fakepkg/__init__.py", "fakepkg/core.py"]
    assert (target / "fakepkg" / "core.py").read_text(encoding="utf-8") == WHEEL_FILES[
        "fakepkg/core.py"
    ]
    assert [p.name for p in cache.iterdir()] == ["sources"]  # the download folder is gone

    offline = FakeFetcher(None)
    second = open_source("fakepkg==1.2.3", cache, fetch=offline)
    assert offline.calls == []
    assert second == first

    result = find_name(Project(second, cache), "helper")
    assert [(d.file, d.line, str(d.name)) for d in result.definitions] == [
        ("fakepkg/core.py", 5, "fakepkg.core:helper")
    ]
    assert [(s.line, str(s.caller)) for s in result.call_sites] == [(2, "fakepkg.core:run")]


def test_release_fetch_failure_propagates_and_caches_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(SourceError) as excinfo:
        open_source("fakepkg==1.2.3", cache, fetch=FakeFetcher(None))
    assert str(excinfo.value) == "offline: cannot download fakepkg==1.2.3"
    assert files_under(cache) == []


def test_bad_wheel_is_a_clear_error_and_is_not_cached(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    bad = tmp_path / "fakepkg-1.2.3-py3-none-any.whl"
    bad.write_bytes(b"this is not a zip archive")
    with pytest.raises(SourceError) as excinfo:
        open_source("fakepkg==1.2.3", cache, fetch=FakeFetcher(bad))
    assert str(excinfo.value) == (
        "fakepkg-1.2.3-py3-none-any.whl is not a valid wheel (File is not a zip file); "
        "delete it and retry"
    )
    assert files_under(cache) == []
    (tmp_path / "good").mkdir()
    good = FakeFetcher(build_wheel(tmp_path / "good"))
    assert open_source("fakepkg==1.2.3", cache, fetch=good).packages == ("fakepkg",)
    assert good.calls == [("fakepkg", "1.2.3")]


def test_existing_directory_named_like_a_release_is_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "pkg==1.0"
    make_package(folder)
    monkeypatch.chdir(tmp_path)
    fetcher = FakeFetcher(None)
    tree = open_source("pkg==1.0", tmp_path / "cache", fetch=fetcher)
    assert (tree.root, tree.packages, fetcher.calls) == (folder.resolve(), ("app",), [])


# -- the installed package ---------------------------------------------------------------------
def test_installed_default_without_sglang_names_the_release_form() -> None:
    try:
        importlib.metadata.distribution("sglang")
    except importlib.metadata.PackageNotFoundError:
        pass
    else:
        pytest.skip("sglang is installed in this Python")
    with pytest.raises(SourceError) as excinfo:
        open_source(None)
    assert str(excinfo.value) == (
        f"sglang is not installed in this Python ({sys.executable}); analyse a release "
        "without installing it: --source sglang==X.Y.Z (for example sglang==0.5.9), "
        "or pass a directory with --source"
    )


def test_installed_package_is_located_without_importing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed form, shown on a distribution that is installed here (click)."""
    monkeypatch.setattr(source_module, "DEFAULT_PACKAGE", "click")
    dist = importlib.metadata.distribution("click")
    package_dir = Path(str(dist.locate_file("click")))
    tree = open_source(None)
    assert tree == SourceTree(package_dir.parent, ("click",), f"click=={dist.version} (installed)")
