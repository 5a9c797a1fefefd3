"""How the tracer sees calls: ``sys.monitoring`` (Python 3.12+) or ``sys.setprofile``.

Both implement :class:`Backend`: :meth:`~Backend.attach` a selected code object,
:meth:`~Backend.start`, :meth:`~Backend.stop`; both report to a :class:`~.recorder.Recorder`.
"""

from __future__ import annotations

import sys
import threading
from types import CodeType, FrameType
from typing import Any, Protocol

from .extract import Probe
from .recorder import Recorder


class Backend(Protocol):
    name: str
    codes: dict[CodeType, Probe]

    def attach(self, code: CodeType, probe: Probe) -> None: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


class MonitoringBackend:
    """``sys.monitoring``: PY_START/PY_RETURN on the selected code objects only. PY_UNWIND
    cannot be local (CPython 3.12, 3.13): it is global, and its callback, which then runs for
    every frame an exception leaves, is one set lookup for code not selected."""

    name = "monitoring"

    def __init__(self, recorder: Recorder) -> None:
        self.codes: dict[CodeType, Probe] = {}
        mon: Any = sys.monitoring  # type: ignore[attr-defined, unused-ignore]
        free = [tool for tool in (4, 3) if mon.get_tool(tool) is None]  # 2 is viztracer's
        if not free:
            raise RuntimeError("sys.monitoring tool ids 3 and 4 are both in use")
        self.tool: int = free[0]
        mon.use_tool_id(self.tool, "sgtrace")
        codes, enter, exit_, frame_of = self.codes, recorder.enter, recorder.exit, sys._getframe

        def on_start(code: CodeType, offset: int) -> None:
            probe = codes.get(code)
            if probe is not None:
                enter(probe, frame_of(1))

        def on_return(code: CodeType, offset: int, value: Any) -> None:
            if code in codes:
                exit_(code, value, None)

        def on_unwind(code: CodeType, offset: int, exc: BaseException) -> None:
            if code in codes:
                exit_(code, None, exc.__class__.__name__)

        mon.register_callback(self.tool, mon.events.PY_START, on_start)
        mon.register_callback(self.tool, mon.events.PY_RETURN, on_return)
        mon.register_callback(self.tool, mon.events.PY_UNWIND, on_unwind)

    def attach(self, code: CodeType, probe: Probe) -> None:
        mon: Any = sys.monitoring  # type: ignore[attr-defined, unused-ignore]
        self.codes[code] = probe
        mon.set_local_events(self.tool, code, mon.events.PY_START | mon.events.PY_RETURN)
        mon.set_events(self.tool, mon.events.PY_UNWIND)

    def start(self) -> None:
        """Nothing to do: events flow once a code object is attached."""

    def stop(self) -> None:
        mon: Any = sys.monitoring  # type: ignore[attr-defined, unused-ignore]
        for code in self.codes:
            mon.set_local_events(self.tool, code, 0)
        mon.set_events(self.tool, 0)
        for event in (mon.events.PY_START, mon.events.PY_RETURN, mon.events.PY_UNWIND):
            mon.register_callback(self.tool, event, None)
        mon.free_tool_id(self.tool)


class ProfileBackend:
    """``sys.setprofile`` in this thread and ``threading.setprofile`` for new ones. The hook
    runs for every call and return, C calls included, of every function: it does as little
    as it can for those not selected."""

    name = "profile"

    def __init__(self, recorder: Recorder) -> None:
        self.rec = recorder
        self.codes: dict[CodeType, Probe] = {}
        codes, enter, exit_ = self.codes, recorder.enter, recorder.exit

        def hook(frame: FrameType, event: str, arg: Any) -> None:
            if event == "call":
                probe = codes.get(frame.f_code)
                if probe is not None:
                    enter(probe, frame)
            elif event == "return":
                code = frame.f_code
                if code in codes:
                    exit_(code, arg, None)

        self.hook = hook

    def attach(self, code: CodeType, probe: Probe) -> None:
        self.codes[code] = probe

    def start(self) -> None:
        if sys.getprofile() is not None:
            self.rec.note("replaced the sys.setprofile function already installed", True)
        threading.setprofile(self.hook)
        sys.setprofile(self.hook)

    def stop(self) -> None:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type, unused-ignore]


def pick_backend(requested: str) -> tuple[type[MonitoringBackend | ProfileBackend], str | None]:
    """The backend class for ``requested`` (auto, monitoring, profile), and why not the one
    requested, if so."""
    if requested != "profile" and hasattr(sys, "monitoring"):
        return MonitoringBackend, None
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    why = f"sys.monitoring needs Python 3.12+, this is {version}: using sys.setprofile"
    return ProfileBackend, why if requested == "monitoring" else None
