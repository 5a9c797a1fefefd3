"""Streams outputs to the tokenizer manager (from 0.5.13 a component with the algorithm the
server was launched with): each output carries speculative metrics where it is not NONE."""

from __future__ import annotations


class SchedulerOutputStreamer:
    def __init__(self, scheduler) -> None:
        self.spec_algorithm = scheduler.spec_algorithm
        self.streamed: set[str] = set()  # the algorithms outputs were streamed with

    def stream_output(self, reqs) -> None:
        if reqs:
            self.streamed.add(self.spec_algorithm.value)
