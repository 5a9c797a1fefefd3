"""Result processing as a Scheduler mixin, shaped like SGLang 0.5.9 to 0.5.12."""

from __future__ import annotations


class SchedulerOutputProcessorMixin:
    def process_batch_result_decode(self, batch, result) -> None:
        for req, tokens in zip(batch.reqs, result.next_token_ids):
            req.output_ids.extend(tokens)

    def process_batch_result_prefill(self, batch, result) -> None:
        for req, tokens in zip(batch.reqs, result.next_token_ids):
            req.output_ids.extend(tokens)
