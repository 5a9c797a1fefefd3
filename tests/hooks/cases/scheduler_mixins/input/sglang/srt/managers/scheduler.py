"""A toy scheduler whose result processing comes from a mixin (SGLang 0.5.9 to 0.5.12)."""

from __future__ import annotations

from sglang.srt.managers.overlap_utils import FutureMap
from sglang.srt.managers.schedule_batch import ForwardMode, ScheduleBatch
from sglang.srt.managers.scheduler_output_processor_mixin import SchedulerOutputProcessorMixin
from sglang.srt.managers.toy_scheduler import ToyScheduler
from sglang.srt.mem_cache.common import TreeCache
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm


class Scheduler(ToyScheduler, SchedulerOutputProcessorMixin):
    def __init__(self, worker, tp_worker) -> None:
        self.spec_algorithm = SpeculativeAlgorithm.EAGLE3
        self.model_worker = worker
        self.tp_worker = tp_worker
        self.tree_cache = TreeCache()
        self.running_batch = ScheduleBatch([], ForwardMode.DECODE)
        self.waiting_queue = []
        self.future_map = FutureMap(64, "cpu", self.spec_algorithm)
        self.streamed: set[str] = set()
        self.init_loop()

    def _add_request_to_queue(self, req, is_retracted: bool = False) -> None:
        self.waiting_queue.append(req)

    def get_new_batch_prefill(self):
        return self.prefill_waiting()

    def abort_request(self, recv_req) -> None:
        self.abort(recv_req)

    def run_batch(self, batch):
        return self.launch(batch)

    def process_batch_result(self, batch, result) -> None:
        if batch.forward_mode.is_decode():
            self.process_batch_result_decode(batch, result)
        elif batch.forward_mode.is_extend():
            self.process_batch_result_prefill(batch, result)
