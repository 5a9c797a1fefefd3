"""Consumes batch results: appends the accepted tokens to each request, streams them."""

from __future__ import annotations


class SchedulerBatchResultProcessor:
    def __init__(self, scheduler) -> None:
        self.scheduler = scheduler
        self.decode_results = 0

    def process_batch_result_decode(self, batch, result) -> None:
        self.decode_results += 1
        took = self.scheduler.take_tokens(batch, result)
        self.scheduler.output_streamer.stream_output(took)

    def process_batch_result_prefill(self, batch, result) -> None:
        took = self.scheduler.take_tokens(batch, result)
        self.scheduler.output_streamer.stream_output(took)
