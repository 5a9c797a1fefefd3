"""Batches and results shaped like SGLang's (the attributes the tracer's extractors read)."""

from __future__ import annotations

import enum


class ForwardMode(enum.IntEnum):
    EXTEND = 1
    DECODE = 2


class CpuTensor:
    """Stands in for a torch tensor: ``shape``, ``is_cpu`` and ``tolist``."""

    def __init__(self, values: list[int], is_cpu: bool = True) -> None:
        self.values = values
        self.shape = (len(values),)
        self.is_cpu = is_cpu

    def tolist(self) -> list[int]:
        return list(self.values)


class VerifyInput:
    def __init__(self, draft_token_num: int, spec_steps: int) -> None:
        self.draft_token_num = draft_token_num
        self.spec_steps = spec_steps


class Batch:
    def __init__(self, batch_size: int, mode: ForwardMode) -> None:
        self.reqs = [object() for _ in range(batch_size)]
        self.seq_lens = CpuTensor([16] * batch_size, is_cpu=False)
        self.forward_mode = mode
        self.forward_iter: int | None = None
        self.spec_info: VerifyInput | None = None


class ForwardBatch:
    def __init__(self, batch: Batch) -> None:
        self.batch_size = len(batch.reqs)


class Result:
    def __init__(self, accept_lens: list[int]) -> None:
        self.accept_lens = CpuTensor(accept_lens, is_cpu=False)  # on the device until copied
        self.num_correct_drafts = 0

    def copy_to_cpu(self) -> None:
        self.accept_lens = CpuTensor(self.accept_lens.values, is_cpu=True)
        self.num_correct_drafts = sum(self.accept_lens.values) - len(self.accept_lens.values)
