"""Start one scheduler process per TP rank, wait until each is idle, then SIGKILL them all.

As SGLang's launcher does: ``multiprocessing`` with the ``spawn`` start method (children
re-run ``sitecustomize`` from the inherited ``PYTHONPATH``), and shutdown by SIGKILL, so no
exit handler runs in the children. ``--start-method fork`` checks the tracer after ``fork``.

    python -m fakeserve.launch --tp 2 --plan 2,2,8,8,2 [--fault off-drafts] [--decide after-result]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
from collections.abc import Sequence

from fakeserve.scheduler import Scheduler


def run_scheduler(
    rank: int, plan: Sequence[int], faults: frozenset[str], decide: str, ready
) -> None:  # noqa: ANN001
    scheduler = Scheduler(rank, faults, decide)
    scheduler.event_loop(plan)
    scheduler.wait_for_requests(ready.set)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--plan", default="2,2,8,8,2")
    parser.add_argument("--fault", action="append", default=[])
    parser.add_argument("--start-method", default="spawn")
    parser.add_argument("--decide", choices=["in-step", "after-result"], default="in-step")
    args = parser.parse_args(argv)
    plan = [int(size) for size in args.plan.split(",")]
    context = multiprocessing.get_context(args.start_method)
    readies = [context.Event() for _ in range(args.tp)]
    children = [
        context.Process(
            target=run_scheduler, args=(rank, plan, frozenset(args.fault), args.decide, ready)
        )
        for rank, ready in enumerate(readies)
    ]
    for child in children:
        child.start()
    for ready, child in zip(readies, children, strict=True):
        if not ready.wait(timeout=60):
            raise SystemExit(f"scheduler pid {child.pid} did not become idle")
    for child in children:
        os.kill(child.pid, signal.SIGKILL)
        child.join()
    print("killed", " ".join(str(child.exitcode) for child in children))


if __name__ == "__main__":
    main()
