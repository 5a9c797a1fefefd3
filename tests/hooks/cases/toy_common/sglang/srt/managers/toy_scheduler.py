"""The loop every toy case's ``Scheduler`` shares: SGLang's overlap scheduler, reduced.

Requests wait in ``waiting_queue`` (set by the case's ``Scheduler``); each iteration merges the last prefill batch into the
running batch, schedules the waiting requests as one prefill batch (the case's
``get_new_batch_prefill``) or else decodes the running batch, and the driver processes each
batch's result after the next batch was launched. Each case's ``Scheduler`` defines SGLang's
methods and attributes under SGLang's names and calls these helpers.

KV slots: a prefill allocates a request's tokens; a decode step allocates ahead what it can
produce (the draft tokens of a verify, one token of a plain decode); a finished or retracted
request gives them back (``release_kv_cache``).
"""

from __future__ import annotations

from sglang.srt.managers.io_struct import AbortReq
from sglang.srt.managers.schedule_batch import ForwardMode, Req, ScheduleBatch
from sglang.srt.mem_cache.common import release_kv_cache


class ToyScheduler:
    """The shared loop; the case's ``Scheduler.__init__`` sets SGLang's attributes first."""

    def init_loop(self) -> None:
        self.last_batch: ScheduleBatch | None = None
        self.forward_ct = 0
        self.decode_launches: list[int] = []  # the draft steps of each decode launch (0: plain)
        self.aborted: list[str] = []  # the requests whose abort was sent to the tokenizer

    def get_next_batch_to_run(self) -> ScheduleBatch | None:
        last = self.last_batch
        if last is not None and last.forward_mode.is_extend():
            merged = [r for r in last.reqs if not r.finished() and not r.is_retracted]
            self.running_batch.reqs = self.running_batch.reqs + merged
        self.running_batch.filter_batch()
        batch = self.get_new_batch_prefill()
        if batch is None and self.running_batch.reqs:
            batch = self.running_batch
            batch.forward_mode = ForwardMode.DECODE
            batch.spec_algorithm = self.spec_algorithm
            ahead = 1 if self.spec_algorithm.is_none() else self.model_worker.speculative_num_draft_tokens
            for req in batch.reqs:
                self.tree_cache.grow(req, ahead)
        self.last_batch = batch
        return batch

    def prefill_waiting(self) -> ScheduleBatch | None:
        """The waiting requests as one prefill batch (finished ones are dropped)."""
        reqs = [req for req in self.waiting_queue if not req.finished()]
        self.waiting_queue = []
        if not reqs:
            return None
        for req in reqs:
            self.tree_cache.allocate(req, len(req.tokens))
            req.is_retracted = False  # upstream: prepare_for_extend
        return ScheduleBatch(reqs, ForwardMode.EXTEND, self.spec_algorithm)

    def launch(self, batch: ScheduleBatch):
        """Run ``batch`` on the worker in place; the relay must be the one of its mode."""
        if self.future_map.spec_algo is not self.spec_algorithm:
            raise RuntimeError("the future map relays for another algorithm")
        self.forward_ct += 1
        batch.forward_iter = self.forward_ct
        if batch.forward_mode.is_decode():
            spec = not self.spec_algorithm.is_none()
            self.decode_launches.append(self.model_worker.speculative_num_steps if spec else 0)
        return self.model_worker.forward_batch_generation(batch)

    def abort(self, recv_req: AbortReq) -> None:
        """Upstream's abort handler, reduced: a queued request (a retracted one too) is popped
        and answered; a running one finishes (upstream: at its next step) and is answered."""
        matched = [
            i
            for i, req in enumerate(self.waiting_queue)
            if recv_req.abort_all or req.rid.startswith(recv_req.rid)
        ]
        for i in reversed(matched):
            self.aborted.append(self.waiting_queue.pop(i).rid)
        for req in self.running_batch.reqs:
            if not req.finished() and (recv_req.abort_all or req.rid.startswith(recv_req.rid)):
                req.finished_reason = "abort"
                self.aborted.append(req.rid)

    def finish(self, reqs: list[Req]) -> None:
        """The requests end (their last token was decoded): their slots are given back."""
        for req in reqs:
            req.finished_reason = "length"
            if req.rid in self.tree_cache.held:
                release_kv_cache(req, self.tree_cache, is_insert=True)
        self.waiting_queue = [req for req in self.waiting_queue if not req.finished()]

    def take_tokens(self, batch: ScheduleBatch, result) -> list[Req]:
        """Append each live request's tokens of ``result``; the requests that took them
        (retracted and finished ones are skipped, as upstream's processor does)."""
        took = []
        for req, tokens in zip(batch.reqs, result.next_token_ids):
            if req.finished() or req.is_retracted:
                continue
            req.output_ids.extend(tokens)
            took.append(req)
        return took
