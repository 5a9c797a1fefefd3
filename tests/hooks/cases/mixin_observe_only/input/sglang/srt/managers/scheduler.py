"""A toy scheduler whose result processing comes from a mixin (SGLang 0.5.9 to 0.5.12)."""

from __future__ import annotations

from sglang.srt.managers.scheduler_output_processor_mixin import SchedulerOutputProcessorMixin


class Scheduler(SchedulerOutputProcessorMixin):
    def __init__(self, worker) -> None:
        self.worker = worker

    def run_batch(self, batch):
        return self.worker.forward_batch_generation(batch)

    def process_batch_result(self, batch, result) -> None:
        if batch.forward_mode.is_decode():
            self.process_batch_result_decode(batch, result)
        elif batch.forward_mode.is_extend():
            self.process_batch_result_prefill(batch, result)
