"""The deep-dive plugin (``trace --full --window N``): every Python call, around each toggle.

It listens to the tracer's recorder (installed after it). In a scheduler process, at its first
step, viztracer starts recording every call into its ring buffer (``entries`` calls; older ones
are dropped). ``window`` steps after the hook's decision toggles, the buffer is saved in
viztracer's format to ``deep-dive/`` for ``vizviewer``: the toggle, the ``window`` steps after
it, and as many steps before it as the buffer held. Each step's end is an instant event
``sgtrace step N ends``.

Needs the ``sys.monitoring`` backend (Python 3.12+; viztracer's profiler would replace the
tracer's ``sys.setprofile``) and viztracer in SGLang's Python, imported only when it starts:
without either, it says so and the tracer records the selected functions only.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from typing import Any

from . import registry
from .recorder import Recorder
from .tracer import installed as installed_tracer


class DeepDive:
    """A recorder listener: starts viztracer at the first step, saves after each toggle."""

    def __init__(self, recorder: Recorder, window: int, entries: int) -> None:
        self.rec, self.window, self.entries = recorder, window, entries
        self.tracer: Any = None  # the VizTracer, from the first step on
        self.until: int | None = None
        self.toggles: list[int] = []

    def __call__(self, role: str, step: int | None, facts: dict[str, Any] | None) -> None:
        if step is None:
            return
        if role == "decision" and facts and facts.get("changed"):
            self.toggles.append(step)
            self.until = step + self.window
        elif role == "step":
            if self.tracer is None:  # scheduler processes only, from their first step
                viztracer = importlib.import_module("viztracer")
                self.tracer = viztracer.VizTracer(tracer_entries=self.entries, verbose=0)
                self.tracer.start()
            self.tracer.log_instant(f"sgtrace step {step} ends", scope="p")
            if self.until is not None and step >= self.until:
                self.save(step)

    def save(self, step: int) -> None:
        name = f"viztracer-{self.rec.pid}-steps-{self.toggles[0]}-{step}.json"
        self.tracer.save(os.path.join(self.rec.out_dir, "deep-dive", name))
        self.tracer.clear()
        record = {"type": "deep_dive", "path": "deep-dive/" + name, "toggles": self.toggles}
        self.rec.write(json.dumps(dict(record, last_step=step)))
        self.until, self.toggles = None, []

    def close(self) -> None:
        if self.tracer is not None:
            self.tracer.stop()


def install(config_path: str) -> DeepDive | None:
    """Listen to this process's tracer, as configured by the JSON file ``config_path``."""
    with open(config_path, encoding="utf-8") as fh:
        config = json.load(fh)
    if config["window"] is None:
        return None
    tracer = installed_tracer()
    if tracer is None:
        sys.stderr.write("sgtrace: deep dive skipped: the tracer plugin is not installed\n")
        return None
    recorder = tracer.recorder
    if recorder.backend_name != "monitoring":
        recorder.note(
            "deep dive (--full) needs the sys.monitoring backend (Python 3.12+), since "
            "viztracer's profiler would replace sys.setprofile; recording the selected "
            "functions only",
            True,
        )
        return None
    if importlib.util.find_spec("viztracer") is None:
        recorder.note(
            f"deep dive (--full) needs viztracer in this Python ({sys.executable}): pip install "
            "viztracer; recording the selected functions only",
            True,
        )
        return None
    deep_dive = DeepDive(recorder, config["window"], config["entries"])
    recorder.listener = deep_dive
    registry.register(registry.PluginKind.DEEP_DIVE, deep_dive)
    return deep_dive
