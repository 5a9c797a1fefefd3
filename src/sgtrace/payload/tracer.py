"""The tracer plugin: records the calls of selected functions in this Python process.

:mod:`.boot` calls :func:`install` in every Python process started with the bootstrap directory
on ``PYTHONPATH``, SGLang's scheduler process per TP rank included. Lazy: the import patcher
reports each selected module once it has run, and the selected functions' code objects are
attached then; nothing is imported early. :func:`uninstall` stops it and closes the file.
"""

from __future__ import annotations

import json
import os
import types
from typing import Any

from . import registry
from .backends import Backend, pick_backend
from .extract import MISSING, Probe, encode, parse_path
from .patcher import ImportPatcher
from .recorder import Recorder


class Tracer:
    """The installed tracer of one process: recorder, backend, import patcher."""

    def __init__(self, recorder: Recorder, backend: Backend, patcher: ImportPatcher) -> None:
        self.recorder, self.backend, self.patcher = recorder, backend, patcher

    def close(self) -> None:
        self.backend.stop()
        self.patcher.stop()
        if self.recorder.listener is not None:
            registry.uninstall(registry.PluginKind.DEEP_DIVE)
            self.recorder.listener = None
        self.recorder.close()


def install(config_path: str) -> Tracer:
    """Install the tracer in this process, as configured by the JSON file ``config_path``."""
    found = registry.installed(registry.PluginKind.TRACER, Tracer)
    if found is not None:
        return found
    with open(config_path, encoding="utf-8") as fh:
        config = json.load(fh)
    backend_class, why = pick_backend(config["backend"])
    paths = [[parse_path(p) for p in config[key]] for key in ("step_paths", "rank_paths")]
    out_dir = os.path.join(os.path.dirname(os.path.abspath(config_path)), config["out_dir"])
    recorder = Recorder(os.path.normpath(out_dir), backend_class.name, *paths)
    if why:
        recorder.note(why, True)
    backend: Backend = backend_class(recorder)
    patcher = ImportPatcher()
    pending: dict[str, list[Probe]] = {}
    for probe in map(Probe, config["probes"]):
        pending.setdefault(probe.name.split(":", 1)[0], []).append(probe)

    def loaded(module: types.ModuleType) -> None:
        for probe in pending.pop(module.__name__, ()):
            code, detail = resolve(module, probe.name.split(":", 1)[1])
            if code is not None and code in backend.codes:
                detail = f"same code as {backend.codes[code].name}"
                code = None
            if code is not None:
                probe.code = code
                backend.attach(code, probe)
            attach = {"type": "attach", "fn": probe.name, "ok": code is not None}
            recorder.write(encode(dict(attach, detail=detail)))

    for name in pending:
        patcher.watch(name, loaded)
    patcher.start()
    backend.start()
    tracer = Tracer(recorder, backend, patcher)
    os.register_at_fork(after_in_child=_reopen)
    registry.register(registry.PluginKind.TRACER, tracer)
    return tracer


def uninstall() -> None:
    """Undo :func:`install`: stop the backend, remove the finder, close the file."""
    registry.uninstall(registry.PluginKind.TRACER)


def installed() -> Tracer | None:
    return registry.installed(registry.PluginKind.TRACER, Tracer)


def _reopen() -> None:
    tracer = installed()
    if tracer is not None:
        tracer.recorder.open()


def resolve(module: types.ModuleType, qualname: str) -> tuple[types.CodeType | None, str]:
    """The code object of ``qualname`` in ``module``, through decorators; or (None, why)."""
    obj: Any = module
    for part in qualname.split("."):
        if part == "<locals>":
            return None, "a function defined inside a function cannot be attached"
        found = vars(obj).get(part, MISSING) if isinstance(obj, type) else MISSING
        obj = getattr(obj, part, MISSING) if found is MISSING else found
        if obj is MISSING:
            return None, f"{module.__name__} has no attribute {qualname!r}"
    for _ in range(20):
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        elif isinstance(obj, property):
            obj = obj.fget
        elif getattr(obj, "__wrapped__", None) is not None:
            obj = obj.__wrapped__
        else:
            break
    code = getattr(obj, "__code__", None)
    if code is None:
        return None, f"{qualname} is a {type(obj).__name__}, not a Python function"
    if code.co_name != qualname.rsplit(".", 1)[-1]:
        return None, f"{qualname} runs code named {code.co_name}: a decorator without __wrapped__"
    return code, f"{code.co_filename}:{code.co_firstlineno}"
