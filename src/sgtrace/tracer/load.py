"""Read a trace directory: the per-process ``events-<pid>.jsonl`` files the plugin wrote.

A process killed by SIGKILL in the middle of a ``write`` could leave its last line unfinished;
such a line is skipped with a :class:`Note`. Anything else that cannot be used is skipped with
one warning naming the file and line, and the rest is loaded: a line that is not UTF-8 or not
JSON (too deep, an integer too long), a record with a negative duration, a time or number out
of range or a fact that is not finite (NaN accept lengths); a file that is not a regular file
(a directory or FIFO named like one, a symlink loop) or cannot be read; the file of a process
already read from another file (its calls would count twice). When nothing is usable the error
lists why. The warnings are :attr:`Trace.warnings`, shown with ``sgtrace validate``'s notes.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> _ = (folder / "events-7.jsonl").write_text(
...     '{"type":"process","pid":7,"ppid":1,"argv":["python"],"python":"3.12.1","backend":"monitoring"}\\n'
...     '{"type":"call","fn":"m:f","role":"other","rank":0,"step":3,"t0":5,"dur":2,"tid":1}\\n'
...     '{"type":"call","fn":"m:f","role":"other","rank":0,"step":4,"t0":9,"dur":-2,"tid":1}\\n'
... )
>>> trace = load_trace(folder)
>>> [(e.pid, e.step, str(e.function)) for e in trace.events]
[(7, 3, 'm:f')]
>>> [w.replace(str(folder), "DIR") for w in trace.warnings]
['DIR/events-7.jsonl:3: skipped: negative duration -2 ns']
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from sgtrace.errors import TraceReadError
from sgtrace.names import QualName
from sgtrace.payload.config import CONFIG_NAME, OFF_STATE_KEY
from sgtrace.tracer.events import (
    Attachment,
    Backend,
    Note,
    ProcessInfo,
    TraceEvent,
    parse_event,
    require_int,
)
from sgtrace.tracer.rules import OffState

EVENTS_GLOB = "events-*.jsonl"
CONFIG_FILE = "sgtrace_tracer.json"
INT64 = 2**63  # times are perf_counter_ns; pids, ranks, steps and threads are machine ints
ReadBytes = Callable[[Path], bytes]
WARNINGS_PER_FILE = 10  # then one line says how many more were skipped


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
    warnings: tuple[str, ...] = ()  # what was skipped, one line each: file:line: why

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
        lines += [f"warning: {warning}" for warning in self.warnings]
        return tuple(lines + sorted({note.text for note in self.notes}))


class _Collector:
    def __init__(self) -> None:
        self.processes: list[ProcessInfo] = []
        self.events: list[TraceEvent] = []
        self.attachments: list[Attachment] = []
        self.notes: list[Note] = []
        self.deep_dives: list[DeepDiveFile] = []
        self.warnings: list[str] = []

    def read_file(self, path: Path, directory: Path, read_bytes: ReadBytes) -> None:
        try:
            kind = os.stat(path).st_mode
            if not stat.S_ISREG(kind):
                raise OSError(f"not a regular file ({_kind(kind)})")
            data = read_bytes(path)
        except OSError as exc:
            self.warnings.append(f"{path}: skipped: cannot read it: {exc.strerror or exc}")
            return
        lines = data.split(b"\n")
        unfinished = lines.pop()
        if not lines:
            self.warnings.append(f"{path}: skipped: empty; the plugin writes a process line first")
            return
        pid, skipped = 0, 0
        for number, line in enumerate(lines, start=1):
            problem = self._read_line(line, number, path, pid, directory)
            if isinstance(problem, int):
                pid = problem
                continue
            if number == 1:
                self.warnings.append(f"{path}:1: file skipped: {problem}")
                return
            skipped += 1
            if skipped <= WARNINGS_PER_FILE:
                self.warnings.append(f"{path}:{number}: skipped: {problem}")
        if skipped > WARNINGS_PER_FILE:
            more = skipped - WARNINGS_PER_FILE
            self.warnings.append(f"{path}: {more} more lines skipped (not shown)")
        if unfinished:
            self.notes.append(
                Note(pid, f"{path.name}: last line unfinished (process killed while writing)")
            )

    def _read_line(
        self, line: bytes, number: int, path: Path, pid: int, directory: Path
    ) -> int | str:
        """The pid in force after ``line``, or why the line cannot be used."""
        try:
            record = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError as exc:
            return f"not UTF-8 (byte {line[exc.start]:#x} at column {exc.start + 1})"
        except RecursionError:
            return "JSON nested too deep"
        except ValueError as exc:  # not JSON, or an integer too long to convert
            return f"not JSON ({exc})"
        if not isinstance(record, Mapping):
            return f"not a JSON object: {line[:80]!r}"
        if number == 1 and record.get("type") != "process":
            return "the first line is not a process record"
        try:
            return self.add(record, path, pid, directory)
        except _ImplausibleError as exc:
            return str(exc)
        except (ValueError, KeyError, TypeError, TraceReadError) as exc:
            return f"cannot read the record: {exc}"

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
            seen = next((p for p in self.processes if p.pid == info.pid), None)
            if seen is not None:
                raise _ImplausibleError(
                    f"process {info.pid} was already read from {seen.path.name}; its calls "
                    "would count twice (two traces in one directory?)"
                )
            self.processes.append(info)
            return info.pid
        if kind == "call":
            event = parse_event(record, pid)
            _check_event(event)
            self.events.append(event)
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


class _ImplausibleError(ValueError):
    """A well-formed record with values no real call has: they would skew every sum."""


def _check_event(event: TraceEvent) -> None:
    if event.duration_ns < 0:
        raise _ImplausibleError(f"negative duration {event.duration_ns} ns")
    for name in ("start_ns", "duration_ns", "pid", "rank", "step", "thread"):
        value = getattr(event, name)
        if value is not None and not -INT64 < value < INT64:
            raise _ImplausibleError(
                f"{name} out of range ({str(value)[:20]}..., {len(str(value))} digits)"
            )
    facts = event.facts
    numbers = [
        *(facts.accept_lengths or ()),
        facts.accept_length,
        facts.step_period_s,
        facts.interrupted_period_s,
    ]
    if any(x is not None and not math.isfinite(x) for x in numbers):
        raise _ImplausibleError(f"a fact is not a finite number ({facts.describe()})")


def _kind(mode: int) -> str:
    kinds = {stat.S_ISDIR: "a directory", stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket"}
    return next((name for test, name in kinds.items() if test(mode)), "a device")


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


def load_trace(trace_dir: Path, read_bytes: ReadBytes = Path.read_bytes) -> Trace:
    """Read every ``events-<pid>.jsonl`` in ``trace_dir``; raise ``TraceReadError`` if none
    is usable. ``read_bytes`` reads one file (passed in so tests can make one unreadable)."""
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
        collector.read_file(path, trace_dir, read_bytes)
    if not collector.processes:
        raise TraceReadError(
            f"nothing usable in {trace_dir}:\n"
            + "\n".join(f"  {warning}" for warning in collector.warnings)
        )
    return Trace(
        directory=trace_dir,
        processes=tuple(sorted(collector.processes, key=lambda p: p.pid)),
        events=tuple(sorted(collector.events, key=TraceEvent.sort_key)),
        attachments=tuple(collector.attachments),
        notes=tuple(collector.notes),
        deep_dives=tuple(collector.deep_dives),
        selected=_selected(trace_dir),
        warnings=tuple(collector.warnings),
    )


def hook_off_state(trace_dir: Path) -> OffState:
    """What the off state of the hook that recorded ``trace_dir`` ran, from the
    ``sgtrace_hook.json`` written beside the trace (``sgtrace trace --out HOOK_DIR``): its
    ``options.off_state``; a config without one was written by a hook before the plain off
    state, whose off was upstream's zero-step state; no config at all: the plain off state, the
    only one of this hook."""
    path = trace_dir / CONFIG_NAME
    if not path.is_file():
        return OffState.PLAIN
    try:
        options = json.loads(path.read_text("utf-8")).get("options") or {}
        return OffState(options.get(OFF_STATE_KEY, OffState.ZERO_STEP.value))
    except (OSError, ValueError, AttributeError) as exc:  # ValueError: unknown off_state too
        raise TraceReadError(
            f"{path}: cannot read the hook's off state ({exc}); pass --off-state to say what "
            "the hook's off runs"
        ) from exc
