"""Progress of long work (parsing a whole package, resolving its calls), for a person to watch.

The engine reports :class:`Progress` values to a sink passed in (``Project(progress=...)``);
it prints nothing itself. :class:`ThrottledProgress` is the sink a command line wants: quiet
for short runs, then one line now and then, written with the function it is given (stderr,
never stdout, which may be the output):

>>> lines = []
>>> clock = iter([0.0, 0.5, 2.5, 2.6, 4.0]).__next__
>>> sink = ThrottledProgress(lines.append, clock)
>>> for done in (100, 200, 300, 400):
...     sink(Progress(Stage.PARSE, done, 400))
>>> lines
['sgtrace: parsing 200/400 files (50%)', 'sgtrace: parsing 400/400 files (100%)']
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum


class Stage(str, Enum):
    """What the engine is doing, with the unit it counts."""

    PARSE = "parsing"
    RESOLVE = "resolving"

    @property
    def unit(self) -> str:
        return "files" if self is Stage.PARSE else "definitions"


@dataclass(frozen=True)
class Progress:
    """``done`` of ``total`` units of ``stage`` finished."""

    stage: Stage
    done: int
    total: int

    def line(self) -> str:
        share = 100 * self.done // self.total if self.total else 100
        return f"sgtrace: {self.stage.value} {self.done}/{self.total} {self.stage.unit} ({share}%)"


ProgressSink = Callable[[Progress], None]


class ThrottledProgress:
    """A sink that writes a line only once ``after_s`` seconds have passed since it was made,
    then at most every ``every_s`` seconds, and always the end of a stage it reported on."""

    def __init__(
        self,
        write: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        after_s: float = 2.0,
        every_s: float = 1.0,
    ) -> None:
        self.write = write
        self.clock = clock
        self.start = clock()
        self.after_s = after_s
        self.every_s = every_s
        self.last: float | None = None
        self.shown: set[Stage] = set()

    def __call__(self, progress: Progress) -> None:
        now = self.clock()
        finished = progress.done >= progress.total
        if finished and progress.stage in self.shown:
            self.shown.discard(progress.stage)
        elif now - self.start < self.after_s or (
            self.last is not None and now - self.last < self.every_s
        ):
            return
        else:
            self.shown.add(progress.stage)
        self.last = now
        self.write(progress.line())
