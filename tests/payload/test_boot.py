"""The bootstrap: plugins in their order, a broken manifest or plugin never stops the process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sgtrace.bootstrap import BootPlugin, render_boot_files
from sgtrace.payload import boot, registry
from sgtrace.payload.registry import PluginKind


def write(directory: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)


def test_a_manifest_that_cannot_be_used_installs_nothing_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / boot.MANIFEST).write_text('{"plugins": [{"name": "sgtrace-hook"}]}')
    boot.install_plugins(str(tmp_path))
    assert capsys.readouterr().err == (
        f"sgtrace: no plugin installed, {boot.MANIFEST} is unusable: KeyError('kind')\n"
    )
    assert registry.lookup(PluginKind.HOOK) is None


def test_a_plugin_that_fails_to_install_is_reported_and_the_next_one_installs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    installed: list[str] = []

    def broken(path: str) -> None:
        raise OSError("disk gone")

    monkeypatch.setitem(boot.INSTALLERS, PluginKind.TRACER, broken)
    monkeypatch.setitem(boot.INSTALLERS, PluginKind.DEEP_DIVE, installed.append)
    plugins = [
        BootPlugin(PluginKind.DEEP_DIVE, "deep.json", "{}"),
        BootPlugin(PluginKind.TRACER, "tracer.json", "{}"),
    ]
    write(tmp_path, render_boot_files(plugins))
    kinds = [p["kind"] for p in json.loads((tmp_path / boot.MANIFEST).read_text())["plugins"]]
    assert kinds == ["tracer", "deep-dive"]  # installed in this order
    boot.install_plugins(str(tmp_path))
    assert capsys.readouterr().err == (
        "sgtrace: plugin tracer failed to install: OSError('disk gone')\n"
    )
    assert installed == [str(tmp_path / "deep.json")]


def test_the_shadowed_sitecustomize_is_the_next_one_on_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, theirs, mark = tmp_path / "boot", tmp_path / "site", tmp_path / "ran.txt"
    for folder in (mine, theirs):
        folder.mkdir()
        (folder / "sitecustomize.py").write_text(
            f"open({str(mark)!r}, 'a').write('{folder.name}')\n"
        )
    monkeypatch.setattr(sys, "path", [str(mine), str(theirs)])
    assert boot.run_shadowed(str(mine)) == str(theirs / "sitecustomize.py")
    assert mark.read_text() == "site"
