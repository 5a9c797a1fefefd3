"""One decision of the speculation hook, as the hook writes it and the tracer and replay read it.

The hook hands every decision to :meth:`DecisionLog.record`; the tracer instruments that method
and reads the record's fields (``sgtrace.tracer.selection``), and ``sgtrace validate --policy``
turns recorded decisions back into the policy's observations (:meth:`DecisionRecord.observation`)
to replay them.

>>> record = DecisionRecord(step=3, rank=0, batch_size=40, spec_on=False, changed=True,
...                         reason="high-load", accept_length=2.5)
>>> record.was_on, record.observation().accept_lengths
(True, (2.5,))
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .policy import Observation

MAX_DECISIONS = 4096  # the decisions a process keeps in memory (the tracer records them all)


@dataclass(frozen=True)
class DecisionRecord:
    """One policy decision on one TP rank, after one decode result.

    ``step``: the hook's own decode-result counter; ``batch_size``: requests in the batch;
    ``spec_on``/``changed``/``reason``: the decision; ``accept_length``: the mean accept length
    the policy was fed (None: the result drafted nothing, a plain decode while off);
    ``step_period_s``: the seconds since the previous decode result on the deciding rank, timed
    for a policy that reads a clock only, where the two results were consecutive batches;
    ``interrupted_period_s``: those seconds where other batches ran in between. Where the
    decision was carried (:mod:`.carry`):
    ``source_rank``, the rank whose policy decided it (this one for its own decisions; None: not
    carried, each rank decided for itself), and ``iteration``, the scheduler loop iteration at
    which this rank applied it (the same on every rank; None: applied when decided).
    ``arriving`` above 0: a decision on requests arriving (``Observation.arriving``), not on a
    decode result; ``step`` is then the next result's; ``cohort`` and ``cohort_tokens``: the
    cohort among them (``Observation.cohort``), ``wave_lengths`` their lengths.
    """

    step: int
    rank: int
    batch_size: int
    spec_on: bool
    changed: bool
    reason: str
    accept_length: float | None
    step_period_s: float | None = None
    interrupted_period_s: float | None = None
    source_rank: int | None = None
    iteration: int | None = None
    arriving: int = 0
    cohort: int = 0
    cohort_tokens: int = 0
    wave_lengths: tuple[int, ...] = ()

    @property
    def is_carried(self) -> bool:
        """A decision another rank took: a copy of a toggle, not this rank's policy at work."""
        return self.source_rank is not None and self.source_rank != self.rank

    @property
    def was_on(self) -> bool:
        """Whether speculation was on before this decision."""
        return self.spec_on != self.changed

    def observation(self) -> Observation:
        """What the policy observed: replaying a policy over these gives the same decisions
        (the mean of one accept length is that length, exactly)."""
        return Observation(
            step=self.step,
            batch_size=self.batch_size,
            accept_lengths=None if self.accept_length is None else (self.accept_length,),
            spec_on=self.was_on,
            step_period_s=self.step_period_s,
            interrupted_period_s=self.interrupted_period_s,
            arriving=self.arriving,
            cohort=self.cohort,
            cohort_tokens=self.cohort_tokens,
            wave_lengths=self.wave_lengths,
        )


class DecisionLog:
    """The decisions of one process, the latest :data:`MAX_DECISIONS` of them."""

    def __init__(self) -> None:
        self._entries: deque[DecisionRecord] = deque(maxlen=MAX_DECISIONS)

    def record(self, decision: DecisionRecord) -> None:
        """Keep ``decision``; the tracer instruments this method. Keep it small."""
        self._entries.append(decision)

    @property
    def entries(self) -> tuple[DecisionRecord, ...]:
        return tuple(self._entries)
