"""The target model's worker (toy): the plain decode path runs on it directly."""

from __future__ import annotations

from sglang.srt.managers.utils import GenerationBatchResult
from sglang.srt.model_executor.model_runner import ModelRunner
from sglang.srt.speculative.toy_model import next_token


class TpModelWorker:
    def __init__(self, spec_algorithm) -> None:
        self.model_runner = ModelRunner(spec_algorithm)
        self.sequences: dict[int, list[int]] = {}  # its GPU state: each request's tokens

    def forward_batch_generation(self, batch) -> GenerationBatchResult:
        """A plain extend or decode: one token per request."""
        if batch.forward_mode.is_extend():
            for req in batch.reqs:
                self.sequences[req.rid] = list(req.tokens)
        else:
            self.model_runner.check_graphs("DECODE")
        tokens = []
        for req in batch.reqs:
            sequence = self.sequences[req.rid]
            sequence.append(next_token(sequence))
            tokens.append([sequence[-1]])
        return GenerationBatchResult(tokens)
