"""Target, draft and speculative workers; the speculative one asks a toy policy each decode step.

``decide``: ``in-step`` decides inside the step it governs; ``after-result`` decides when the
scheduler has processed a decode result, for the next launch (as sgtrace's hook in SGLang).
The step of each ``DecisionRecord`` is the worker's own counter of decisions.
``faults`` makes a worker break one rule of ``sgtrace validate`` on purpose:
``off-drafts`` (an OFF step still drafts 3 steps), ``off-skips-extend`` (an OFF step skips the
draft extend), ``rank1-disagrees`` (rank 1 decides the opposite at hook step 3).
"""

from __future__ import annotations

from sgtrace_payload.record import DecisionLog, DecisionRecord  # the traced copy

from fakeserve.batch import Batch, ForwardBatch, ForwardMode, Result, VerifyInput

ON_AT_MOST = 4  # the toy policy: speculate while batch_size <= 4
DECISIONS = DecisionLog()  # where the hook hands its decisions over


def busy(n: int) -> int:
    """Unselected work: called many times per step, must never appear in the trace."""
    return sum(range(n))


class TargetWorker:
    def forward_batch_generation(self, batch: Batch, is_verify: bool = False) -> Result:
        for _ in range(20):
            busy(50)
        width = batch.spec_info.draft_token_num if batch.spec_info else 1
        return Result([min(2, width)] * len(batch.reqs))


class DraftWorker:
    def __init__(self) -> None:
        self.speculative_num_steps = 3
        self.topk = 1

    def draft(self, batch: Batch) -> VerifyInput:
        self.draft_forward(ForwardBatch(batch))
        return VerifyInput(draft_token_num=4, spec_steps=self.speculative_num_steps)

    def draft_forward(self, forward_batch: ForwardBatch) -> None:
        busy(100)

    def _draft_extend_for_prefill(self, batch: Batch) -> None:
        busy(100)

    def _draft_extend_for_decode(self, batch: Batch, result: Result) -> None:
        busy(100)


class SpecWorker:
    def __init__(self, rank: int, faults: frozenset[str], decide: str) -> None:
        self.rank = rank
        self.faults = faults
        self.decides_after_result = decide == "after-result"
        self.hook_step = 0
        self.target_worker = TargetWorker()
        self.draft_worker = DraftWorker()
        self.speculative_num_steps = 3
        self.speculative_num_draft_tokens = 4
        self.spec_on = True
        self.accept_length: float | None = None

    def decide(self, batch: Batch) -> bool:
        step = self.hook_step
        size = len(batch.reqs)
        spec_on = size <= ON_AT_MOST
        if "rank1-disagrees" in self.faults and self.rank == 1 and step == 3:
            spec_on = not spec_on
        changed = spec_on != self.spec_on
        reason = "low-load" if spec_on else "high-load"
        DECISIONS.record(
            DecisionRecord(
                step=step,
                rank=self.rank,
                batch_size=size,
                spec_on=spec_on,
                changed=changed,
                reason=reason,
                accept_length=self.accept_length,
            )
        )
        self.spec_on = spec_on
        self.hook_step += 1
        return spec_on

    def forward_batch_generation(self, batch: Batch) -> Result:
        if batch.forward_mode == ForwardMode.EXTEND:
            result = self.target_worker.forward_batch_generation(batch)
            self.draft_worker._draft_extend_for_prefill(batch)
            return result
        spec_on = self.spec_on if self.decides_after_result else self.decide(batch)
        if spec_on or "off-drafts" in self.faults:
            batch.spec_info = self.draft_worker.draft(batch)
        else:
            batch.spec_info = VerifyInput(draft_token_num=1, spec_steps=0)
        result = self.verify(batch)
        if spec_on or "off-skips-extend" not in self.faults:
            self.draft_worker._draft_extend_for_decode(batch, result)
        return result

    def verify(self, batch: Batch) -> Result:
        return self.target_worker.forward_batch_generation(batch, is_verify=True)
