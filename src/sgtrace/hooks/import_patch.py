"""Patch functions of modules when they are first imported, and undo it (stdlib only).

Copied verbatim by sgtrace as module ``sgtrace_hook_imports`` beside ``sgtrace_hook`` in a
``--mode runtime`` directory. :class:`ImportPatcher` puts a finder first on ``sys.meta_path``;
for a target module it finds the real spec through the other finders and wraps its loader, so
that right after the module's code ran, each target function is replaced by
``make_wrapper(original)``. Nothing is imported eagerly: a module never imported is never
touched. :meth:`ImportPatcher.stop` removes the finder and puts every original back.

>>> import json, logging
>>> patcher = ImportPatcher({"json": [("dumps", lambda f: lambda *a, **k: "patched")]},
...                         logging.getLogger("demo"))
>>> patcher.start(); json.dumps(1)
'patched'
>>> patcher.stop(); json.dumps(1)
'1'
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any

ORIGINAL_ATTR = "__sgtrace_hook_original__"
Wrap = Callable[[Callable[..., Any]], Callable[..., Any]]  # original -> wrapper


class ImportPatcher:
    """Wraps functions of modules when they are imported; restores them on :meth:`stop`.

    ``targets`` maps a module name to ``(qualname, make_wrapper)`` pairs; a qualname missing
    from its module is reported on ``logger`` and skipped.
    """

    def __init__(self, targets: dict[str, list[tuple[str, Wrap]]], logger: logging.Logger) -> None:
        self.targets = targets
        self.logger = logger
        self.finder = _PostImportFinder(self)
        self.saved: list[tuple[Any, str, Any]] = []  # (owner, name, own attribute or None)

    def start(self) -> None:
        sys.meta_path.insert(0, self.finder)
        for name in self.targets:
            if name in sys.modules:
                self.patch_module(sys.modules[name])

    def stop(self) -> None:
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        for owner, attr, original in reversed(self.saved):
            if original is None:
                delattr(owner, attr)
            else:
                setattr(owner, attr, original)
        self.saved.clear()

    def patch_module(self, module: types.ModuleType) -> None:
        for qualname, make_wrapper in self.targets.get(module.__name__, ()):
            *path, attr = qualname.split(".")
            owner = module
            for part in path:
                owner = getattr(owner, part, None)
            current = getattr(owner, attr, None) if owner is not None else None
            if current is None:
                self.logger.error(
                    "sgtrace-hook: %s has no %s; the hook was generated for another release",
                    module.__name__,
                    qualname,
                )
                continue
            if getattr(current, ORIGINAL_ATTR, None) is not None:
                continue  # already wrapped (module reloaded)
            wrapper = make_wrapper(current)
            setattr(wrapper, ORIGINAL_ATTR, current)
            self.saved.append((owner, attr, vars(owner).get(attr)))
            setattr(owner, attr, wrapper)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds target modules through the other finders and wraps their loader."""

    def __init__(self, patcher: ImportPatcher) -> None:
        self.patcher = patcher

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.patcher.targets:
            return None
        # only the finders after this one: two such wrappers (hook and tracer) asking each
        # other would recurse forever
        meta_path = sys.meta_path
        later = meta_path[meta_path.index(self) + 1 :] if self in meta_path else meta_path
        for finder in later:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PatchingLoader(spec.loader, self.patcher.patch_module)
        return spec


class _PatchingLoader(importlib.abc.Loader):
    """Runs the real loader, then patches the fresh module; delegates everything else."""

    def __init__(
        self, inner: importlib.abc.Loader, on_loaded: Callable[[types.ModuleType], None]
    ) -> None:
        self._inner = inner
        self._on_loaded = on_loaded

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._inner.exec_module(module)
        self._on_loaded(module)
