"""A toy scheduler: runs batches on a worker and hands their results to the processor."""

from __future__ import annotations

from sglang.srt.managers.scheduler_components.batch_result_processor import (
    SchedulerBatchResultProcessor,
)


class Scheduler:
    def __init__(self, worker) -> None:
        self.worker = worker
        self.batch_result_processor = SchedulerBatchResultProcessor()
        self.forward_ct = 0

    def run_batch(self, batch):
        self.forward_ct += 1
        batch.forward_iter = self.forward_ct
        return self.worker.forward_batch_generation(batch)

    def process_batch_result(self, batch, result) -> None:
        if batch.forward_mode.is_decode():
            self.batch_result_processor.process_batch_result_decode(batch, result)
        elif batch.forward_mode.is_extend():
            self.batch_result_processor.process_batch_result_prefill(batch, result)
