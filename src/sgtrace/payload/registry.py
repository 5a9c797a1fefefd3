"""What sgtrace installed in this Python process: the one piece of process-wide state.

Each plugin kind is installed at most once per process; :func:`uninstall` closes it and forgets
it, so a test or a shutdown leaves the process as it found it.
"""

from __future__ import annotations

from enum import Enum
from typing import Protocol, TypeVar


class PluginKind(Enum):
    """The plugins of a bootstrap directory, in the order they are installed."""

    HOOK = "hook"
    TRACER = "tracer"
    DEEP_DIVE = "deep-dive"


class Installed(Protocol):
    """An installed plugin: :meth:`close` undoes everything it did to the process."""

    def close(self) -> None: ...


T = TypeVar("T", bound=Installed)
_INSTALLED: dict[PluginKind, Installed] = {}


def installed(kind: PluginKind, cls: type[T]) -> T | None:
    """The installed plugin of ``kind`` if it is a ``cls``, else None."""
    plugin = _INSTALLED.get(kind)
    return plugin if isinstance(plugin, cls) else None


def lookup(kind: PluginKind) -> Installed | None:
    """The installed plugin of ``kind``, whatever its type, or None."""
    return _INSTALLED.get(kind)


def register(kind: PluginKind, plugin: Installed) -> None:
    _INSTALLED[kind] = plugin


def uninstall(kind: PluginKind) -> None:
    """Close and forget the plugin of ``kind``, if one is installed."""
    plugin = _INSTALLED.pop(kind, None)
    if plugin is not None:
        plugin.close()
