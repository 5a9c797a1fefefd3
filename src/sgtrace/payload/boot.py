"""Run by the bootstrap directory's ``sitecustomize`` in every Python process started with it.

``sgtrace_boot.json`` beside this package lists the plugins (:class:`~.registry.PluginKind`
and the config file of each); :func:`boot` installs them in that order, then runs the
``sitecustomize`` the directory's own shadows, so a machine's start-up code still runs. A plugin
that fails to install is reported on stderr and never stops the process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Callable

from .registry import PluginKind

MANIFEST = "sgtrace_boot.json"


def _install_hook(path: str) -> None:
    from .hook import install

    install(path)


def _install_tracer(path: str) -> None:
    from .tracer import install

    install(path)


def _install_deep_dive(path: str) -> None:
    from .deepdive import install

    install(path)


INSTALLERS: dict[PluginKind, Callable[[str], None]] = {
    PluginKind.HOOK: _install_hook,
    PluginKind.TRACER: _install_tracer,
    PluginKind.DEEP_DIVE: _install_deep_dive,
}


def boot(directory: str) -> str | None:
    """Install the plugins of the bootstrap ``directory``; return the shadowed
    ``sitecustomize`` that was run, if any."""
    install_plugins(directory)
    return run_shadowed(directory)


def install_plugins(directory: str) -> None:
    try:
        with open(os.path.join(directory, MANIFEST), encoding="utf-8") as fh:
            plugins = json.load(fh)["plugins"]
        entries = [(PluginKind(p["kind"]), str(p["config"])) for p in plugins]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        sys.stderr.write(f"sgtrace: no plugin installed, {MANIFEST} is unusable: {exc!r}\n")
        return
    for kind, config in sorted(entries, key=lambda entry: list(PluginKind).index(entry[0])):
        try:
            INSTALLERS[kind](os.path.join(directory, config))
        except Exception as exc:  # a plugin must never stop the host process
            sys.stderr.write(f"sgtrace: plugin {kind.value} failed to install: {exc!r}\n")


def run_shadowed(directory: str) -> str | None:
    """Run the first other ``sitecustomize.py`` on ``sys.path``; return its path."""
    here = os.path.abspath(directory)
    for entry in sys.path:
        folder = os.path.abspath(entry or os.getcwd())
        if folder == here:
            continue
        candidate = os.path.join(folder, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location(
                "_sgtrace_shadowed_sitecustomize", candidate
            )
            if spec is None or spec.loader is None:
                return None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return candidate
    return None
