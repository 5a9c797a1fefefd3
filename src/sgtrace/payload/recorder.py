"""The tracer's recorder: each completed call of a selected function is one JSON line.

Each line is ``os.write``-n to ``events-<pid>.jsonl`` at once: no user-space buffer, so a
process killed by SIGKILL loses nothing already recorded. The hot path (:meth:`Recorder.enter`,
:meth:`Recorder.exit`) reads facts and writes; everything else happens once.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from .extract import MISSING, RETURN, FactReader, Probe, Step, encode, encode_facts, walk

_now, _thread_id = time.perf_counter_ns, threading.get_ident
Listener = Callable[[str, "int | None", "dict[str, Any] | None"], None]


class Recorder:
    """Turns enter/exit of selected calls into JSON lines, one ``os.write`` per line.

    ``step_paths``/``rank_paths`` are tried on the ``self`` of selected calls until one gives
    an integer: the object holding the step counter, and the process's TP rank.
    """

    def __init__(
        self,
        out_dir: str,
        backend_name: str,
        step_paths: list[tuple[Step, ...]],
        rank_paths: list[tuple[Step, ...]],
    ) -> None:
        self.out_dir, self.backend_name = out_dir, backend_name
        self.step_paths, self.rank_paths = step_paths, rank_paths
        self.holder: Any = None
        self.step_path: tuple[Step, ...] | None = None
        self.rank: int | None = None
        self.listener: Listener | None = None
        self.learning = True
        self.failed: set[tuple[str, str]] = set()
        self.fd: int | None = None
        self.pid = os.getpid()
        self.stacks: dict[int, list[tuple[Probe, Any, dict[str, Any] | None, int]]] = {}
        self.open()

    def open(self) -> None:
        """(Re)open this process's file: at install and in the child after ``os.fork``."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self.pid = os.getpid()
        self.stacks = {}
        path = os.path.join(self.out_dir, f"events-{self.pid}.jsonl")
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        version = ".".join(str(part) for part in sys.version_info[:3])
        argv, ppid = list(getattr(sys, "orig_argv", sys.argv)), os.getppid()
        header = dict(type="process", pid=self.pid, ppid=ppid, argv=argv, python=version)
        self.write(encode(dict(header, backend=self.backend_name)))

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def write(self, line: str) -> None:
        if self.fd is None:
            return
        try:
            os.write(self.fd, (line + "\n").encode())
        except OSError as exc:  # disk full, closed file: stop recording, never break the host
            self.fd = None
            sys.stderr.write(f"sgtrace: stopped recording in pid {self.pid}: {exc!r}\n")

    def note(self, text: str, to_stderr: bool = False) -> None:
        self.write(encode({"type": "note", "text": text}))
        if to_stderr:
            sys.stderr.write(f"sgtrace: {text}\n")

    def enter(self, probe: Probe, frame: Any) -> None:
        # f_locals builds a dict on 3.12 (a proxy on 3.13+): only when something reads it
        local = frame.f_locals if probe.has_facts or self.learning else None
        if self.learning:
            self._learn(probe, local.get("self") if local is not None else None)
        facts = self._read(probe, probe.entry, local, None, {}) if probe.entry else None
        stack = self.stacks.get(_thread_id())
        if stack is None:
            stack = self.stacks[_thread_id()] = []
        stack.append((probe, local, facts, _now()))

    def exit(self, code: Any, value: Any, error: str | None) -> None:
        end = _now()
        tid = _thread_id()
        stack = self.stacks.get(tid)
        while stack:  # entries left by calls whose exit was not seen are dropped
            probe, local, facts, start = stack.pop()
            if probe.code is code:
                break
        else:
            return
        if probe.exit:
            facts = self._read(probe, probe.exit, local, value, facts or {})
        step = facts.pop("step", None) if facts else None
        if step is None and self.step_path is not None:
            step = walk(self.holder, self.step_path)
            step = step if step.__class__ is int else None
        line = (
            f'{probe.prefix}"rank":{self.rank or 0},"step":{"null" if step is None else step},'
            f'"t0":{start},"dur":{end - start},"tid":{tid}'
        )
        if facts:
            line += ',"facts":' + encode_facts(facts)
        if error is not None:
            line += ',"error":' + encode(error)
        self.write(line + "}")
        if self.listener is not None:
            self.listener(probe.role, step, facts)

    def _read(
        self,
        probe: Probe,
        readers: tuple[FactReader, ...],
        local: Any,
        value: Any,
        out: dict[str, Any],
    ) -> dict[str, Any]:
        for fact, candidates, transform in readers:
            try:
                for name, steps in candidates:
                    head = value if name is RETURN else local.get(name)
                    if head is None:
                        continue
                    found = walk(head, steps) if steps else head
                    if found is not MISSING:
                        found = transform(found)
                        if found is not MISSING:
                            out[fact] = found
                            break
            except Exception as exc:  # an extractor must never break the traced program
                self._fail((probe.name, fact), f"extractor {fact} of {probe.name} failed: {exc!r}")
        return out

    def _learn(self, probe: Probe, obj: Any) -> None:
        try:
            if self.holder is None:
                found = [path for path in self.step_paths if type(walk(obj, path)) is int]
                self.holder, self.step_path = (obj, found[0]) if found else (None, None)
            if self.rank is None:
                ranks = [r for r in (walk(obj, p) for p in self.rank_paths) if type(r) is int]
                self.rank = ranks[0] if ranks else None
        except Exception as exc:  # a property that raises: never break the traced program
            self._fail((probe.name, "self"), f"reading step/rank from {probe.name} failed: {exc!r}")
        self.learning = self.holder is None or self.rank is None

    def _fail(self, key: tuple[str, str], text: str) -> None:
        if key not in self.failed:
            self.failed.add(key)
            self.note(text + " (reported once)")
