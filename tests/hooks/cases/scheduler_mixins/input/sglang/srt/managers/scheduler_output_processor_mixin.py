"""Result processing as a Scheduler mixin, shaped like SGLang 0.5.9 to 0.5.12: outputs are
streamed by the scheduler itself, with speculative metrics where its algorithm is not NONE."""

from __future__ import annotations


class SchedulerOutputProcessorMixin:
    def process_batch_result_decode(self, batch, result) -> None:
        self.stream_output(self.take_tokens(batch, result))

    def process_batch_result_prefill(self, batch, result) -> None:
        self.stream_output(self.take_tokens(batch, result))

    def stream_output(self, reqs) -> None:
        if reqs:
            self.streamed.add(self.spec_algorithm.value)
