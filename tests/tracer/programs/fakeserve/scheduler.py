"""The scheduler: ``forward_ct``, a rank in ``ps.tp_rank``, a decorated ``run_batch``."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

from fakeserve.batch import Batch, ForwardMode, Result
from fakeserve.workers import SpecWorker


def nvtx_range(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator like SGLang's ``scheduler_nvtx_method``: the tracer must unwrap it."""

    def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return func(*args, **kwargs)

        return wrapper

    return decorator


class ParallelState:
    def __init__(self, tp_rank: int) -> None:
        self.tp_rank = tp_rank


class BatchResultProcessor:
    def __init__(self, worker: SpecWorker) -> None:
        self.worker = worker

    def process_batch_result_decode(self, batch: Batch, result: Result) -> None:
        result.copy_to_cpu()
        lengths = result.accept_lens.tolist()
        self.worker.accept_length = sum(lengths) / len(lengths)
        if self.worker.decides_after_result:
            self.worker.decide(batch)


class Scheduler:
    def __init__(self, tp_rank: int, faults: frozenset[str], decide: str) -> None:
        self.ps = ParallelState(tp_rank)
        self.forward_ct = 0
        self.model_worker = SpecWorker(tp_rank, faults, decide)
        self.batch_result_processor = BatchResultProcessor(self.model_worker)

    @nvtx_range("scheduler.run_batch")
    def run_batch(self, batch: Batch) -> Result:
        self.forward_ct += 1
        batch.forward_iter = self.forward_ct
        return self.model_worker.forward_batch_generation(batch)

    def event_loop(self, plan: Sequence[int]) -> None:
        """Prefill once, then one decode step per batch size in ``plan``. When the worker
        decides after results, results are processed one launch late (overlap scheduling)."""
        self.run_batch(Batch(plan[0], ForwardMode.EXTEND))
        late = self.model_worker.decides_after_result
        pending: list[tuple[Batch, Result]] = []
        for size in plan:
            batch = Batch(size, ForwardMode.DECODE)
            pending.append((batch, self.run_batch(batch)))
            while len(pending) > int(late):
                self.batch_result_processor.process_batch_result_decode(*pending.pop(0))
        for batch, result in pending:
            self.batch_result_processor.process_batch_result_decode(batch, result)

    def wait_for_requests(self, ready: Callable[[], None]) -> None:
        """Idle forever, like a scheduler waiting for work; killed here, never returns."""
        ready()
        while True:
            time.sleep(1)
