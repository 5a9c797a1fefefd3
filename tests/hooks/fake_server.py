"""Drive a toy SGLang (tests/hooks/cases/*/input) like an overlap scheduler, in its own process.

Run with the hook on ``PYTHONPATH`` (a ``--mode runtime`` directory first, or a patched toy
tree). Each phase admits ``batch_size`` new requests (one extend batch), then runs ``steps``
decode batches; as with SGLang's overlap scheduler, the result of a batch is processed after the
next batch was launched. Prints one JSON object: the hook's recorded decisions, the draft steps
of every decode launch, whether every request's tokens equal the target model's own sequence,
what the worker captured at start-up, and (with ``--uninstall``) what uninstall() restored.

    python fake_server.py --phases 1x40,64x40,1x40 [--rank 1] [--good-draft] [--adaptive]
        [--tp-size 2] [--step-cost ON_S,ON_PER_REQ_S,OFF_S,OFF_PER_REQ_S[,PREFILL_S]]

``--step-cost``: each decode batch takes that long on a virtual GPU (a batch starts when the one
before it ends; processing its result waits, slept, until it ended), speculative or not, plus so
much per request: a machine where speculation wins at small batches and loses at large ones;
each extend batch takes ``PREFILL_S``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import logging
import sys
import time

from sglang.srt.managers.schedule_batch import ForwardMode, Req, ScheduleBatch
from sglang.srt.managers.scheduler import Scheduler
from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2
from sglang.srt.speculative.toy_model import ServerArgs, next_token


def reference(prompt: list[int], length: int) -> list[int]:
    sequence = list(prompt)
    for _ in range(length):
        sequence.append(next_token(sequence))
    return sequence[len(prompt) :]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--phases", required=True, help="BSxSTEPS,...")
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--good-draft", action="store_true")
    parser.add_argument("--adaptive", action="store_true")
    parser.add_argument("--payload", default="sgtrace_payload", help="the payload package")
    parser.add_argument("--uninstall", action="store_true")
    parser.add_argument("--tp-size", type=int, default=1)
    parser.add_argument("--step-cost", default=None)
    args = parser.parse_args()
    cost = [float(x) for x in args.step_cost.split(",")] if args.step_cost else None
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")

    server_args = ServerArgs(
        speculative_adaptive=args.adaptive, draft_is_good=args.good_draft, tp_size=args.tp_size
    )
    worker = EAGLEWorkerV2(server_args, tp_rank=args.rank)
    worker.init_cuda_graphs()
    scheduler = Scheduler(worker)
    pending = None
    requests: list[Req] = []

    gpu_free_at = 0.0  # the batches run one after another on a virtual GPU

    def launch(batch: ScheduleBatch) -> None:
        nonlocal pending, gpu_free_at
        result = scheduler.run_batch(batch)
        seconds = 0.0
        if cost is not None and batch.forward_mode is ForwardMode.DECODE:
            on = worker.speculative_num_steps > 0
            base, per_request = (cost[0], cost[1]) if on else (cost[2], cost[3])
            seconds = base + per_request * len(batch.reqs)
        elif cost is not None and len(cost) > 4:
            seconds = cost[4]
        gpu_free_at = max(time.perf_counter(), gpu_free_at) + seconds
        if pending is not None:
            process(*pending)
        pending = (batch, result, gpu_free_at)

    def process(batch: ScheduleBatch, result: object, done_at: float) -> None:
        time.sleep(max(0.0, done_at - time.perf_counter()))  # the result waits for its batch
        scheduler.process_batch_result(batch, result)

    for phase in args.phases.split(","):
        size, steps = (int(x) for x in phase.split("x"))
        reqs = [Req(len(requests) + i, [len(requests) + i, 5]) for i in range(size)]
        requests.extend(reqs)
        launch(ScheduleBatch(reqs, ForwardMode.EXTEND))
        for _ in range(steps):
            launch(ScheduleBatch(reqs, ForwardMode.DECODE))
    process(*pending)

    hook = importlib.import_module(f"{args.payload}.hook")
    installed = hook.installed()
    decisions = installed.decisions.entries if installed is not None else ()
    report = {
        "decisions": [list(dataclasses.astuple(d)) for d in decisions],
        "launched_steps": worker.launched_steps,
        "outputs_ok": all(r.output_ids == reference(r.prompt, len(r.output_ids)) for r in requests),
        "tokens": sum(len(r.output_ids) for r in requests),
        "captured": worker.captured,
    }
    runner = getattr(getattr(worker, "_target_worker", None), "model_runner", None)
    if runner is not None:  # the launch state's verify, and the runner left as it was
        probe = sys.modules[type(worker).__module__].probe_verify
        report["launch_verify"] = probe(runner.attn_backend, in_capture=False)
        report["runner_patched"] = "_get_attention_backend" in vars(runner)
    if args.uninstall:
        hook.uninstall()
        original = importlib.import_module(f"{args.payload}.patcher").ORIGINAL_ATTR
        processor = type(getattr(scheduler, "batch_result_processor", scheduler))
        report["uninstalled"] = {
            "decode_wrapped": hasattr(processor.process_batch_result_decode, original),
            "init_wrapped": hasattr(EAGLEWorkerV2.__init__, original),
            "controller": repr(getattr(worker, "adaptive_controller", None)),
            "steps": worker.speculative_num_steps,
            "finders": [
                type(f).__name__ for f in sys.meta_path if "PostImport" in type(f).__name__
            ],
        }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
