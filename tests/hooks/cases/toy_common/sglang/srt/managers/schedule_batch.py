"""Requests and batches of a toy scheduler (test input shaped like SGLang 0.5.9-0.5.23)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from sglang.srt.speculative.spec_info import SpeculativeAlgorithm


class ForwardMode(enum.Enum):
    EXTEND = "extend"
    DECODE = "decode"

    def is_decode(self) -> bool:
        return self is ForwardMode.DECODE

    def is_extend(self) -> bool:
        return self is ForwardMode.EXTEND


@dataclass
class Req:
    rid: str
    prompt: list[int]
    output_ids: list[int] = field(default_factory=list)
    is_retracted: bool = False  # set by reset_for_retract, cleared by its next prefill
    finished_reason: str | None = None

    def finished(self) -> bool:
        return self.finished_reason is not None

    def reset_for_retract(self) -> None:
        """Ready for a new prefill (upstream also drops its prefix indices here)."""
        self.is_retracted = True

    @property
    def tokens(self) -> list[int]:
        """Every token of the request so far: what a prefill of it computes."""
        return self.prompt + self.output_ids


@dataclass
class ScheduleBatch:
    reqs: list[Req]
    forward_mode: ForwardMode
    spec_algorithm: SpeculativeAlgorithm = SpeculativeAlgorithm.EAGLE3
    is_extend_in_batch: bool = False
    forward_iter: int | None = None  # set by the scheduler at launch
    batch_is_full: bool = False  # upstream: admission stopped for lack of room

    def filter_batch(self, keep_indices: list[int] | None = None) -> None:
        """Keep the requests at ``keep_indices`` (by default the unfinished ones)."""
        if keep_indices is None:
            keep_indices = [i for i, req in enumerate(self.reqs) if not req.finished()]
        self.reqs = [self.reqs[i] for i in keep_indices]

    def copy(self) -> ScheduleBatch:
        """What the overlap scheduler keeps to process the result: the same requests, a list
        of its own (filtering the running batch leaves it alone)."""
        return ScheduleBatch(
            list(self.reqs),
            self.forward_mode,
            self.spec_algorithm,
            self.is_extend_in_batch,
            self.forward_iter,
        )
