"""Drive a toy SGLang (tests/hooks/cases/*/input) like an overlap scheduler, in its own process.

Run with the hook on ``PYTHONPATH`` (a ``--mode runtime`` directory first, or a patched toy
tree). Each phase admits ``batch_size`` new requests and runs the scheduler's loop until
``steps`` decode batches were launched and the last one's result was processed, then the
phase's requests finish (their slots are given back). Every iteration the scheduler picks its
next batch (a prefill of the waiting requests, or a decode of the running batch; the hook
switches before the prefill scheduling), launches it, and then, as with SGLang's overlap
scheduler, processes the result of the batch launched the iteration before. Prints one JSON
object: the hook's recorded decisions, the draft steps of every decode launch (0: a plain
decode), whether every request's tokens equal the target model's own sequence, the requests
whose KV slots are still held at the end, what the worker captured at start-up, the algorithms
outputs were streamed with, and (with ``--uninstall``) what uninstall() restored.

    python fake_server.py --phases 1x40,64x40,1x40 [--rank 1] [--good-draft] [--adaptive]
        [--dp-attention]
        [--tp-size 2] [--step-cost ON_S,ON_PER_REQ_S,OFF_S,OFF_PER_REQ_S[,PREFILL_S]]
        [--no-overlap] [--abort-after-switch RID]

``--step-cost``: each decode batch takes that long on a virtual GPU (a batch starts when the one
before it ends; processing its result waits, slept, until it ended), speculative or not, plus so
much per request: a machine where speculation wins at small batches and loses at large ones;
each extend batch takes ``PREFILL_S``.

``--no-overlap``: SGLang's normal loop instead, each batch's result processed right after its
launch (where a switch finds no prefill to run, its requests wait for re-admission until the
next iteration). ``--abort-after-switch RID``: the iteration after the first switch starts by
aborting ``RID`` (SGLang handles aborts as it receives requests, before its batch is picked).
Requests are called ``req-000``, ``req-001``, ...; the report lists the aborted ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import logging
import sys
import time

from sglang.srt.managers.io_struct import AbortReq
from sglang.srt.managers.schedule_batch import Req
from sglang.srt.managers.scheduler import Scheduler
from sglang.srt.managers.tp_worker import TpModelWorker
from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
from sglang.srt.speculative.toy_model import ServerArgs, next_token

MAX_ITERATIONS_PER_STEP = 4  # a phase that runs longer than this per decode step is stuck


def reference(prompt: list[int], length: int) -> list[int]:
    sequence = list(prompt)
    for _ in range(length):
        sequence.append(next_token(sequence))
    return sequence[len(prompt) :]


class Loop:
    """The overlap scheduler's loop over one toy scheduler, on a virtual GPU (``cost``), or
    the normal one (``overlap`` False); ``abort``: a request aborted after the first switch."""

    def __init__(
        self,
        scheduler: Scheduler,
        cost: list[float] | None,
        overlap: bool = True,
        abort: str | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.cost = cost
        self.overlap = overlap
        self.abort = abort
        self.algorithm = scheduler.spec_algorithm  # at the start of the last iteration
        self.pending: tuple[object, object, float] | None = None
        self.gpu_free_at = 0.0  # the batches run one after another on the virtual GPU

    def process(self) -> None:
        """Process the result in flight, once its batch ended on the virtual GPU."""
        if self.pending is not None:
            batch, result, done_at = self.pending
            self.pending = None
            time.sleep(max(0.0, done_at - time.perf_counter()))
            self.scheduler.process_batch_result(batch, result)

    def seconds(self, batch: object) -> float:
        cost = self.cost
        if cost is None:
            return 0.0
        if batch.forward_mode.is_decode():
            on = self.scheduler.decode_launches[-1] > 0
            base, per_request = (cost[0], cost[1]) if on else (cost[2], cost[3])
            return base + per_request * len(batch.reqs)
        return cost[4] if len(cost) > 4 else 0.0

    def iterate(self) -> bool:
        """One iteration of the loop; whether it launched a decode batch."""
        switched = self.scheduler.spec_algorithm is not self.algorithm
        self.algorithm = self.scheduler.spec_algorithm
        if switched and self.abort is not None:  # received with this iteration's requests
            self.scheduler.abort_request(AbortReq(rid=self.abort))
            self.abort = None
        batch = self.scheduler.get_next_batch_to_run()
        launched = None
        if batch is not None:
            result = self.scheduler.run_batch(batch)
            self.gpu_free_at = max(time.perf_counter(), self.gpu_free_at) + self.seconds(batch)
            launched = (batch.copy(), result, self.gpu_free_at)
        if not self.overlap:  # this batch's result, now
            self.pending, launched = launched, None
        self.process()
        self.pending = launched
        return batch is not None and batch.forward_mode.is_decode()

    def phase(self, reqs: list[Req], steps: int) -> None:
        """Admit ``reqs``, run until ``steps`` decode batches ran, then finish them."""
        for req in reqs:
            self.scheduler._add_request_to_queue(req)
        decodes = 0
        for _ in range(MAX_ITERATIONS_PER_STEP * steps + 8):
            if decodes == steps:
                break
            decodes += self.iterate()
        else:
            raise SystemExit(f"{len(reqs)} requests: {decodes} decode batches of {steps}, stuck")
        self.process()  # the phase's last result
        self.scheduler.finish(reqs)


def uninstalled(payload: str, scheduler: Scheduler) -> dict[str, object]:
    """Uninstall the hook; whether anything it patched is still patched."""
    importlib.import_module(f"{payload}.hook").uninstall()
    original = importlib.import_module(f"{payload}.patcher").ORIGINAL_ATTR
    processor = type(getattr(scheduler, "batch_result_processor", scheduler))
    return {
        "decode_wrapped": hasattr(processor.process_batch_result_decode, original),
        "init_wrapped": hasattr(EAGLEWorkerV2.__init__, original),
        "prefill_wrapped": hasattr(Scheduler.get_new_batch_prefill, original),
        "result_wrapped": hasattr(Scheduler.process_batch_result, original),
        "finders": [type(f).__name__ for f in sys.meta_path if "PostImport" in type(f).__name__],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--phases", required=True, help="BSxSTEPS,...")
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--good-draft", action="store_true")
    parser.add_argument("--adaptive", action="store_true")
    parser.add_argument("--dp-attention", action="store_true")
    parser.add_argument("--payload", default="sgtrace_payload", help="the payload package")
    parser.add_argument("--uninstall", action="store_true")
    parser.add_argument("--tp-size", type=int, default=1)
    parser.add_argument("--step-cost", default=None)
    parser.add_argument("--no-overlap", action="store_true")
    parser.add_argument("--abort-after-switch", default=None, metavar="RID")
    args = parser.parse_args()
    cost = [float(x) for x in args.step_cost.split(",")] if args.step_cost else None
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")

    server_args = ServerArgs(
        speculative_adaptive=args.adaptive,
        enable_dp_attention=args.dp_attention,
        draft_is_good=args.good_draft,
        tp_size=args.tp_size,
    )
    target = TpModelWorker(SpeculativeAlgorithm.EAGLE3)
    worker = EAGLEWorkerV2(server_args, target, tp_rank=args.rank)
    worker.init_cuda_graphs()
    scheduler = Scheduler(worker, target)
    loop = Loop(scheduler, cost, overlap=not args.no_overlap, abort=args.abort_after_switch)
    requests: list[Req] = []
    for phase in args.phases.split(","):
        size, steps = (int(x) for x in phase.split("x"))
        reqs = [Req(f"req-{n:03d}", [n, 5]) for n in range(len(requests), len(requests) + size)]
        requests.extend(reqs)
        loop.phase(reqs, steps)
    for _ in range(3):  # idle iterations: anything held comes back, finished, and is dropped
        loop.iterate()

    installed = importlib.import_module(f"{args.payload}.hook").installed()
    decisions = installed.decisions.entries if installed is not None else ()
    streamer = getattr(scheduler, "output_streamer", scheduler)
    report = {
        "decisions": [list(dataclasses.astuple(d)) for d in decisions],
        "launched_steps": scheduler.decode_launches,
        "outputs_ok": all(r.output_ids == reference(r.prompt, len(r.output_ids)) for r in requests),
        "tokens": sum(len(r.output_ids) for r in requests),
        "kv_held": sorted(scheduler.tree_cache.held),  # requests whose slots were not given back
        "aborted": scheduler.aborted,  # answered to the tokenizer as aborted
        "captured": worker.captured,
        "streamed": sorted(streamer.streamed),
    }
    if args.uninstall:
        report["uninstalled"] = uninstalled(args.payload, scheduler)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
