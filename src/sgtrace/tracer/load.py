"""Read a trace directory: the per-process ``events-<pid>.jsonl`` files the plugin wrote.

A process killed by SIGKILL in the middle of a ``write`` could leave its last line unfinished;
such a line is skipped with a :class:`Note`. Any other unreadable line is an error naming the
file and line, since a validator must not reason over a trace it half understood.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> _ = (folder / "events-7.jsonl").write_text(
...     '{"type":"process","pid":7,"ppid":1,"argv":["python"],"python":"3.12.1","backend":"monitoring"}\\n'
...     '{"type":"call","fn":"m:f","role":"other","rank":0,"step":3,"t0":5,"dur":2,"tid":1}\\n'
... )
>>> trace = load_trace(folder)
>>> [(e.pid, e.step, str(e.function)) for e in trace.events]
[(7, 3, 'm:f')]
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sgtrace.errors import TraceReadError
from sgtrace.names import QualName
from sgtrace.tracer.events import (
    Attachment,
    Backend,
    Note,
    ProcessInfo,
    TraceEvent,
    parse_event,
    require_int,
)

EVENTS_GLOB = "events-*.jsonl"
CONFIG_FILE = "sgtrace_tracer.json"


@dataclass(frozen=True)
class DeepDiveFile:
    """A viztracer file saved by the deep-dive mode, covering ``toggles`` to ``last_step``."""

    pid: int
    path: Path
    toggles: tuple[int, ...]
    last_step: int


@dataclass(frozen=True)
class Trace:
    """Everything in a trace directory; ``events`` sorted by :meth:`TraceEvent.sort_key`."""

    directory: Path
    processes: tuple[ProcessInfo, ...]
    events: tuple[TraceEvent, ...]
    attachments: tuple[Attachment, ...]
    notes: tuple[Note, ...]
    deep_dives: tuple[DeepDiveFile, ...]
    selected: tuple[QualName, ...]

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(sorted({event.rank for event in self.events}))

    def unattached(self) -> tuple[QualName, ...]:
        """Selected functions attached in no process (never imported, or not found)."""
        attached = {a.function for a in self.attachments if a.is_attached}
        return tuple(name for name in self.selected if name not in attached)

    def remarks(self) -> tuple[str, ...]:
        """What a user should know about the trace: unattached functions, the plugin's notes."""
        lines = [f"selected but attached in no process: {name}" for name in self.unattached()]
        return tuple(lines + sorted({note.text for note in self.notes}))


class _Collector:
    def __init__(self) -> None:
        self.processes: list[ProcessInfo] = []
        self.events: list[TraceEvent] = []
        self.attachments: list[Attachment] = []
        self.notes: list[Note] = []
        self.deep_dives: list[DeepDiveFile] = []

    def read_file(self, path: Path, directory: Path) -> None:
        lines = path.read_text(encoding="utf-8").split("\n")
        unfinished = lines.pop()
        if not lines:
            raise TraceReadError(f"{path}: empty; the plugin writes a process line first")
        pid = 0
        for number, line in enumerate(lines, start=1):
            try:
                record = json.loads(line)
                if not isinstance(record, Mapping):
                    raise ValueError(f"not an object: {line!r}")
                if number == 1 and record.get("type") != "process":
                    raise ValueError("the first line is not a process record")
                pid = self.add(record, path, pid, directory)
            except (ValueError, KeyError, TypeError, TraceReadError) as exc:
                raise TraceReadError(f"{path}:{number}: cannot read the record: {exc}") from exc
        if unfinished:
            self.notes.append(
                Note(pid, f"{path.name}: last line unfinished (process killed while writing)")
            )

    def add(self, record: Mapping[str, object], path: Path, pid: int, directory: Path) -> int:
        kind = record.get("type")
        if kind == "process":
            info = ProcessInfo(
                pid=require_int(record["pid"]),
                ppid=require_int(record["ppid"]),
                argv=tuple(str(arg) for arg in _list(record["argv"])),
                python=str(record["python"]),
                backend=Backend(record["backend"]),
                path=path,
            )
            self.processes.append(info)
            return info.pid
        if kind == "call":
            self.events.append(parse_event(record, pid))
        elif kind == "attach":
            name = QualName.parse(str(record["fn"]))
            self.attachments.append(
                Attachment(pid, name, bool(record["ok"]), str(record.get("detail", "")))
            )
        elif kind == "note":
            self.notes.append(Note(pid, str(record["text"])))
        elif kind == "deep_dive":
            self.deep_dives.append(
                DeepDiveFile(
                    pid,
                    directory / str(record["path"]),
                    tuple(require_int(step) for step in _list(record["toggles"])),
                    require_int(record["last_step"]),
                )
            )
        else:
            raise ValueError(f"unknown record type {kind!r} (written by a newer sgtrace?)")
        return pid


def _list(value: object) -> list[object]:
    if not isinstance(value, list):
        raise ValueError(f"expected a list, got {value!r}")
    return value


def _selected(directory: Path) -> tuple[QualName, ...]:
    config = directory / CONFIG_FILE
    if not config.is_file():
        return ()
    try:
        probes = json.loads(config.read_text(encoding="utf-8"))["probes"]
        return tuple(QualName.parse(str(probe["name"])) for probe in probes)
    except (ValueError, KeyError, TypeError) as exc:
        raise TraceReadError(f"{config}: not a tracer config ({exc})") from exc


def load_trace(trace_dir: Path) -> Trace:
    """Read every ``events-<pid>.jsonl`` in ``trace_dir``; raise ``TraceReadError`` if none."""
    if not trace_dir.is_dir():
        raise TraceReadError(f"{trace_dir} is not a directory; pass the --out of sgtrace trace")
    files = sorted(trace_dir.glob(EVENTS_GLOB), key=lambda p: (len(p.name), p.name))
    if not files:
        raise TraceReadError(
            f"no {EVENTS_GLOB} in {trace_dir}: no Python process ran with the tracer. Was "
            f"{trace_dir} first on PYTHONPATH, and did the command avoid python -S / -I?"
        )
    collector = _Collector()
    for path in files:
        collector.read_file(path, trace_dir)
    return Trace(
        directory=trace_dir,
        processes=tuple(sorted(collector.processes, key=lambda p: p.pid)),
        events=tuple(sorted(collector.events, key=TraceEvent.sort_key)),
        attachments=tuple(collector.attachments),
        notes=tuple(collector.notes),
        deep_dives=tuple(collector.deep_dives),
        selected=_selected(trace_dir),
    )
