"""Consumes batch results: appends the accepted tokens to each request."""

from __future__ import annotations


class SchedulerBatchResultProcessor:
    def __init__(self) -> None:
        self.decode_results = 0

    def process_batch_result_decode(self, batch, result) -> None:
        self.decode_results += 1
        for req, tokens in zip(batch.reqs, result.next_token_ids):
            req.output_ids.extend(tokens)

    def process_batch_result_prefill(self, batch, result) -> None:
        for req, tokens in zip(batch.reqs, result.next_token_ids):
            req.output_ids.extend(tokens)
