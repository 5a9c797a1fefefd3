"""sgtrace deep-dive plugin (``--full --window N``): every Python call, around each toggle.

Written as ``sgtrace_deepdive.py`` beside the tracer plugin, whose recorder it listens to (the
bootstrap installs plugins in name order: ``tracer`` before ``tracer-viz``). In a scheduler
process, at its first step, viztracer starts recording every call into its ring buffer
(``entries`` calls; older ones are dropped). When the hook's decision toggles, ``window`` steps
later the buffer is saved in viztracer's own format to ``deep-dive/`` for ``vizviewer``: the
file covers the toggle, the ``window`` steps after it, and as many steps before it as the
buffer held. The end of each step is marked with an instant event ``sgtrace step N ends``.

Needs the ``sys.monitoring`` backend (Python 3.12+): on older Pythons viztracer's profiler
would replace the tracer's ``sys.setprofile``. Without it, or without viztracer, the plugin
says so on stderr and the tracer records the selected functions only. Stdlib only, bar
viztracer itself.
"""

import importlib.util
import json
import os
import sys


class DeepDive:
    """A tracer listener: starts viztracer at the first step, saves after each toggle."""

    def __init__(self, recorder, window, entries):
        self.rec, self.window, self.entries = recorder, window, entries
        self.tracer, self.until, self.toggles = None, None, []

    def __call__(self, role, step, facts):
        if step is None:
            return
        if role == "decision" and facts and facts.get("changed"):
            self.toggles.append(step)
            self.until = step + self.window
        elif role == "step":
            if self.tracer is None:  # scheduler processes only, from their first step
                from viztracer import VizTracer

                self.tracer = VizTracer(tracer_entries=self.entries, verbose=0)
                self.tracer.start()
            self.tracer.log_instant(f"sgtrace step {step} ends", scope="p")
            if self.until is not None and step >= self.until:
                self.save(step)

    def save(self, step):
        name = f"viztracer-{self.rec.pid}-steps-{self.toggles[0]}-{step}.json"
        self.tracer.save(os.path.join(self.rec.out_dir, "deep-dive", name))
        self.tracer.clear()
        record = {"type": "deep_dive", "path": "deep-dive/" + name, "toggles": self.toggles}
        self.rec.write(json.dumps(dict(record, last_step=step)))
        self.until, self.toggles = None, []

    def close(self):
        if self.tracer is not None:
            self.tracer.stop()


def install(config_path):
    """Listen to this process's tracer, as configured by the JSON file ``config_path``."""
    with open(config_path, encoding="utf-8") as fh:
        config = json.load(fh)
    if config["window"] is None:
        return
    tracer_plugin = sys.modules.get("sgtrace_tracer")
    active = getattr(tracer_plugin, "_ACTIVE", None)
    if active is None:
        sys.stderr.write("sgtrace: deep dive skipped: the tracer plugin is not installed\n")
        return
    recorder = active[0]
    if recorder.backend_name != "monitoring":
        recorder.note(
            "deep dive (--full) needs the sys.monitoring backend (Python 3.12+), since "
            "viztracer's profiler would replace sys.setprofile; recording the selected "
            "functions only",
            True,
        )
    elif importlib.util.find_spec("viztracer") is None:
        recorder.note(
            f"deep dive (--full) needs viztracer in this Python ({sys.executable}): pip install "
            "viztracer; recording the selected functions only",
            True,
        )
    else:
        recorder.listener = DeepDive(recorder, config["window"], config["entries"])
