"""Patches of functions and namespaces that can all be undone, and the import hook that applies
them when a module is first imported.

:class:`Patches` is the undo registry: every attribute or namespace entry it replaces is put back
by :meth:`Patches.undo` (or one at a time with :meth:`Patches.restore`), as viztracer's
``install_all_hooks``/``uninstall_all_hooks`` pair. :class:`ImportPatcher` puts a finder first on
``sys.meta_path``; when a watched module has run, it calls the callbacks registered for it.
Nothing is imported early: a module never imported is never touched.

>>> import json
>>> patcher = ImportPatcher()
>>> def shout(original):
...     return lambda *args, **kwargs: original(*args, **kwargs).upper()
>>> patcher.watch("json", lambda module: patcher.patches.wrap(module, "dumps", shout))
>>> patcher.start(); json.dumps("a")
'"A"'
>>> patcher.stop(); json.dumps("a")
'"a"'
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

ORIGINAL_ATTR = "__sgtrace_original__"
Wrap = Callable[[Callable[..., Any]], Callable[..., Any]]  # original -> wrapper
OnImport = Callable[[types.ModuleType], None]
_ABSENT = object()


@dataclass(frozen=True)
class _Saved:
    """One replaced entry: the owner (an object, or a namespace dict), the name, what it held
    before (``_ABSENT``: the owner had no entry of its own)."""

    owner: Any
    name: str
    before: Any
    is_namespace: bool


class Patches:
    """The undo registry: replaces attributes and namespace entries, and puts them back."""

    def __init__(self) -> None:
        self._saved: list[_Saved] = []

    def __len__(self) -> int:
        return len(self._saved)

    def set_attr(self, owner: Any, name: str, value: Any) -> Any:
        """Set ``owner.name`` to ``value``; return what ``getattr`` gave before."""
        current = getattr(owner, name)
        self._saved.append(_Saved(owner, name, vars(owner).get(name, _ABSENT), False))
        setattr(owner, name, value)
        return current

    def set_item(self, namespace: MutableMapping[str, Any], name: str, value: Any) -> Any:
        """Set ``namespace[name]`` (a module's globals) to ``value``; return the old entry."""
        current = namespace[name]
        self._saved.append(_Saved(namespace, name, current, True))
        namespace[name] = value
        return current

    def wrap(self, owner: Any, qualname: str, make_wrapper: Wrap) -> bool:
        """Replace the function ``owner.<qualname>`` by ``make_wrapper(function)``.

        False when ``owner`` has no such function; already wrapped (a module reloaded) counts
        as done.
        """
        *path, attr = qualname.split(".")
        for part in path:
            owner = getattr(owner, part, None)
        current = getattr(owner, attr, None) if owner is not None else None
        if current is None:
            return False
        if getattr(current, ORIGINAL_ATTR, None) is None:
            wrapper = make_wrapper(current)
            setattr(wrapper, ORIGINAL_ATTR, current)
            self.set_attr(owner, attr, wrapper)
        return True

    def restore(self, owner: Any, name: str) -> None:
        """Undo the latest replacement of ``name`` on ``owner`` now."""
        for index in range(len(self._saved) - 1, -1, -1):
            saved = self._saved[index]
            if saved.owner is owner and saved.name == name:
                del self._saved[index]
                _put_back(saved)
                return

    def undo(self) -> None:
        """Put back everything replaced, the latest first."""
        while self._saved:
            _put_back(self._saved.pop())


def _put_back(saved: _Saved) -> None:
    if saved.is_namespace:
        saved.owner[saved.name] = saved.before
    elif saved.before is _ABSENT:
        if saved.name in vars(saved.owner):
            delattr(saved.owner, saved.name)
    else:
        setattr(saved.owner, saved.name, saved.before)


class ImportPatcher:
    """Calls ``watch``-ed callbacks when their module has run; :meth:`stop` undoes all.

    The callbacks apply their patches through :attr:`patches`, so that :meth:`stop` removes the
    finder and every patch at once.
    """

    def __init__(self) -> None:
        self.patches = Patches()
        self._callbacks: dict[str, list[OnImport]] = {}
        self._finder = _PostImportFinder(self._callbacks, self._loaded)

    def watch(self, module: str, callback: OnImport) -> None:
        """Call ``callback(module)`` once ``module`` has run (at once if it already has, once
        :meth:`start` was called)."""
        self._callbacks.setdefault(module, []).append(callback)

    def start(self) -> None:
        sys.meta_path.insert(0, self._finder)
        for name in [name for name in self._callbacks if name in sys.modules]:
            self._loaded(sys.modules[name])

    def stop(self) -> None:
        if self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        self.patches.undo()

    @property
    def is_started(self) -> bool:
        return self._finder in sys.meta_path

    def _loaded(self, module: types.ModuleType) -> None:
        for callback in self._callbacks.get(module.__name__, ()):
            callback(module)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds watched modules through the finders after it and wraps their loader."""

    def __init__(
        self, watched: dict[str, list[OnImport]], loaded: Callable[[types.ModuleType], None]
    ) -> None:
        self._watched = watched
        self._loaded = loaded

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self._watched:
            return None
        # only the finders after this one: two such finders (hook and tracer) asking each
        # other would recurse forever
        meta_path = sys.meta_path
        later = meta_path[meta_path.index(self) + 1 :] if self in meta_path else meta_path
        for finder in later:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec: importlib.machinery.ModuleSpec | None = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _ReportingLoader(spec, spec.loader, self._loaded)
        return spec


class _ReportingLoader(importlib.abc.Loader):
    """Runs the real loader (put back first: the module never sees this one), then reports."""

    def __init__(
        self,
        spec: importlib.machinery.ModuleSpec,
        inner: importlib.abc.Loader,
        loaded: Callable[[types.ModuleType], None],
    ) -> None:
        self._spec = spec
        self._inner = inner
        self._on_loaded = loaded

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # not set yet (copy, pickle)
            raise AttributeError(name)
        return getattr(self._inner, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._spec.loader = self._inner
        module.__loader__ = self._inner
        self._inner.exec_module(module)
        self._on_loaded(module)


SiteCall = Callable[[Any, tuple[Any, ...], dict[str, Any]], None]
Wrapper = Callable[[Callable[..., Any]], Callable[..., Any]]


def before(site: SiteCall) -> Wrapper:
    """A wrapper factory: run ``site``, then the original method."""

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            site(self, args, kwargs)
            return original(self, *args, **kwargs)

        return wrapper

    return wrap


def then(site: SiteCall) -> Wrapper:
    """A wrapper factory: run the original method, then ``site``."""

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(self, *args, **kwargs)
            site(self, args, kwargs)
            return out

        return wrapper

    return wrap
