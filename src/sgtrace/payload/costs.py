"""What the hook costs the scheduler's process, and what else paused it: the seconds spent in
the hook's code, and the collections of Python's garbage collector there, logged so that a
server slower than its twin can be told apart from noise in its own log.

A live sweep once showed the hook speculating throughout a level, no toggle, yet behind its
EAGLE-3 twin in three turns of six (``bench/results/live/sweep``, call 29 at 32 requests): its
log said nothing of why. Now the hook's process says, every :data:`EVERY` calls of the hook,
what they cost, and logs at once any collection of :data:`PAUSE_S` or more (a full collection in
a process holding a model's Python objects can take a tenth of a second; SGLang unfreezes the
collector after capturing its CUDA graphs). A comparison needs the twin's collections too: the
meter is the hook's; a server without the hook logs none. A collection that ran inside a
hook's call is the collector's, not the hook's: it is left out of the call's seconds and said
apart (live, the first summary said 518 us a call where start-up collections of 0.4-0.7 s fell
inside a few calls; the next, 80 us).

>>> lines = []
>>> meter = CostMeter(lines.append, every=2)
>>> meter.add(0.00004); meter.add(0.40002, collected_s=0.4)
>>> lines
['2 calls, 30.0 us a call in the hook (400.0 ms of collections in them left out); garbage collections: 0, 0.0 ms, the longest 0.0 ms']
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

EVERY = 4096  # hook calls between two summary lines
PAUSE_S = 0.02  # a collection this long is logged when it happens


class CostMeter:
    """Counts the hook's calls and their seconds, and times the garbage collector's runs once
    :meth:`start` hooked it; ``log`` takes each line (summaries and long pauses)."""

    def __init__(
        self,
        log: Callable[[str], None],
        every: int = EVERY,
        pause_s: float = PAUSE_S,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.log = log
        self.every = every
        self.pause_s = pause_s
        self.clock = clock
        self.calls = 0
        self.hook_s = 0.0
        self.collections = 0
        self.gc_s = 0.0
        self.longest_s = 0.0
        self.within_s = 0.0  # collections inside the hook's calls, left out of hook_s
        self.collected_s = 0.0  # every collection timed, never reset (see add)
        self._began: float | None = None
        self.is_started = False

    def start(self) -> None:
        """Time the garbage collector's runs in this process (once)."""
        if not self.is_started:
            gc.callbacks.append(self.on_gc)
            self.is_started = True

    def stop(self) -> None:
        if self.is_started:
            gc.callbacks.remove(self.on_gc)
            self.is_started = False

    def on_gc(self, phase: str, info: dict[str, Any]) -> None:
        """``gc.callbacks``' hook: a collection starts or stops."""
        if phase == "start":
            self._began = self.clock()
            return
        if self._began is None:
            return
        seconds, self._began = self.clock() - self._began, None
        self.collections += 1
        self.gc_s += seconds
        self.collected_s += seconds
        self.longest_s = max(self.longest_s, seconds)
        if seconds >= self.pause_s:
            generation = info.get("generation", "?")
            self.log(f"garbage collection of generation {generation}: {seconds * 1e3:.1f} ms")

    def add(self, seconds: float, collected_s: float = 0.0) -> None:
        """Count one call of the hook that took ``seconds``, ``collected_s`` of them the
        collector's (:attr:`collected_s` after the call less before it); every ``every``
        calls, log a summary and count afresh."""
        self.hook_s += max(0.0, seconds - collected_s)
        self.within_s += collected_s
        self.calls += 1
        if self.calls >= self.every:
            self.log(self.summary())
            self.calls, self.hook_s, self.within_s = 0, 0.0, 0.0
            self.collections, self.gc_s, self.longest_s = 0, 0.0, 0.0

    def summary(self) -> str:
        per_call = self.hook_s / self.calls * 1e6 if self.calls else 0.0
        return (
            f"{self.calls} calls, {per_call:.1f} us a call in the hook ("
            f"{self.within_s * 1e3:.1f} ms of collections in them left out); garbage collections: "
            f"{self.collections}, {self.gc_s * 1e3:.1f} ms, the longest {self.longest_s * 1e3:.1f} ms"
        )
