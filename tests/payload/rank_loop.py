"""One tensor-parallel rank of a toy scheduler loop, run in its own process (multiprocessing).

Each rank runs the real hook (:class:`sgtrace.payload.hook.Hook`, patch delivery) on the
stand-ins of tests/payload/plain_fakes.py (a worker as the hook sees ``EAGLEWorkerV2``, the
scheduler), and a loop as SGLang's overlap scheduler runs it: receive the iteration's requests
(rank 0 reads them from a schedule and broadcasts them to the other ranks over pipes, pickled,
with a broadcast looked up in the receiving module's globals, as ``recv_requests`` does),
schedule prefills (where the hook switches between speculative and plain decoding), launch the
next decode batch in the state the scheduler is in, then process the previous batch's result
(the hook decides, and re-admits what a switch retracted). Every rank has its own clock: the
hook's ``time.perf_counter`` is replaced by one that advances by the step's cost with the rank's
own noise, so that a policy that reads it decides apart on each rank unless one rank decides.

:func:`run_rank` returns what the rank launched at each iteration and the decisions it recorded.
"""

from __future__ import annotations

import random
import sys
import types
from dataclasses import dataclass
from multiprocessing.connection import Connection

from tests.payload import plain_fakes
from tests.payload.payload_support import NAMES, hook_config
from tests.payload.plain_fakes import Batch, Req, Scheduler, Worker

from sgtrace.payload import hook as payload_hook
from sgtrace.payload import registry
from sgtrace.payload.config import SglangNames
from sgtrace.payload.policy import PolicyConfig, PolicyKind

ACCEPT = 2.5  # speculation pays below about 37 requests on this machine (see step_seconds)


def step_seconds(batch_size: int, spec_on: bool) -> float:
    """The toy machine: a speculative step costs more, and more per request."""
    return 0.006 + 0.0003 * batch_size if spec_on else 0.005 + 0.00005 * batch_size


def schedule(iterations: int) -> list[int]:
    """Rank 0's batch size per iteration: low load, load near the crossover (where each
    rank's noise decides), high load, low load again (the growths arrive as new requests:
    the deciding rank's policy is asked on them too)."""
    rng = random.Random(7)
    levels = [(1, 0.15), (36, 0.45), (96, 0.2), (2, 0.2)]
    out: list[int] = []
    for size, share in levels:
        for _ in range(int(iterations * share)):
            out.append(size if size != 36 else size + rng.randint(0, 6))
    return out + [2] * (iterations - len(out))


class TokenizedGenerateReqInput:
    """A new request as the scheduler receives it (the hook counts them by their class name)."""


@dataclass(frozen=True)
class RankRun:
    """What one rank did: the state of each launch, its decisions as recorded
    ``(step, spec_on, changed, iteration, source_rank, arriving)``, its measured periods, and
    the toggles among its decisions that were taken on requests arriving."""

    rank: int
    launches: tuple[bool, ...]
    records: tuple[tuple[int, bool, bool, int | None, int | None, int], ...]
    periods: tuple[float | None, ...]
    arrival_toggles: int = 0


class NoisyClock:
    """``time`` as the hook sees it: ``perf_counter`` read by the hook, advanced by the loop."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now


def receiver_module(
    rank: int, peers: list[Connection], feed: list[int], names: SglangNames = NAMES
) -> types.ModuleType:
    """The module that receives requests: its class's method broadcasts rank 0's list with the
    module global (looked up when called, as SGLang's is); ``names`` say which: the request
    receiver's, or the scheduler's own (0.5.9-0.5.12)."""
    module = types.ModuleType(names.receiver_module)
    source = f"""
def {names.broadcast_requests}(data, rank, dist_group=None, src=0):
    if rank == src:
        for peer in dist_group:
            peer.send(data)  # pickled, the marker included
        return data
    return dist_group[0].recv()

class {names.receiver_class}:
    def {names.receive_requests}(self):
        data = None
        if RANK == 0:  # the batch size, and a new request for each the batch grew by
            size, LAST[0] = FEED[0], FEED.pop(0)
            data = [("batch_size", size)] + [NEW() for _ in range(size - LAST[1])]
            LAST[1] = size
        if len(PEERS) > 0:
            data = {names.broadcast_requests}(data, RANK, PEERS, src=0)
        return data
"""
    module.__dict__.update(
        RANK=rank, PEERS=peers, FEED=list(feed), LAST=[0, 0], NEW=TokenizedGenerateReqInput
    )
    exec(compile(source, names.receiver_module, "exec"), module.__dict__)
    return module


def run_rank(
    rank: int,
    tp_size: int,
    peers: list[Connection],
    carry: bool,
    iterations: int,
    names: SglangNames = NAMES,
) -> RankRun:
    """Run one rank's loop; ``carry``: the hook's carrier is installed (else every rank decides
    for itself, as it would without one); ``names``: the hook's, where it receives."""
    module = receiver_module(rank, peers, schedule(iterations), names)
    if carry:
        sys.modules[names.receiver_module] = module  # patch delivery: installed at attach
    hook = payload_hook.Hook(hook_config(PolicyConfig(kind=PolicyKind.CALIBRATED), names=names))
    registry.register(registry.PluginKind.HOOK, hook)
    clock = NoisyClock()
    payload_hook.time = clock  # type: ignore[assignment]  # this rank's own clock
    noise = random.Random(1000 + rank)
    worker = Worker(rank, tp_size if carry else 1)  # without the carrier: no fallback either
    payload_hook.attach(worker)  # wraps the scheduler's methods (plain_fakes.py)
    scheduler = Scheduler(worker)
    receiver = getattr(module, names.receiver_class)()
    batch_size, launches, in_flight = 1, [], None
    for iteration in range(iterations):
        for item in getattr(receiver, names.receive_requests)() or ():
            if isinstance(item, tuple):
                batch_size = item[1]
        scheduler.get_new_batch_prefill(Batch([Req(f"r{i}") for i in range(batch_size)]))
        spec_on = scheduler.model_worker is worker
        launches.append(spec_on)
        launched = (iteration, batch_size, spec_on)
        if in_flight is not None:
            forward_iter, size, was_on = in_flight
            clock.now += step_seconds(size, was_on) * noise.lognormvariate(0.0, 0.1)
            batch = types.SimpleNamespace(
                reqs=[object()] * size,
                forward_iter=forward_iter,
                spec_algorithm=plain_fakes.Algorithm.EAGLE3,
            )
            result = types.SimpleNamespace(  # a plain decode's result has no accept lengths
                speculative_num_draft_tokens=4 if was_on else None,
                accept_lens=[ACCEPT] * size if was_on else None,
            )
            payload_hook.on_decode_result(batch, result)
            scheduler.process_batch_result(batch, result)  # re-admits what a switch retracted
        in_flight = launched
    entries = hook.decisions.entries
    records = tuple(
        (r.step, r.spec_on, r.changed, r.iteration, r.source_rank, r.arriving) for r in entries
    )
    periods = tuple(r.step_period_s for r in entries)
    arrivals = sum(r.changed and r.arriving > 0 for r in entries)
    payload_hook.uninstall()
    assert hook.plain is not None and hook.plain.ready  # it switched through the plain path
    return RankRun(rank, tuple(launches), records, periods, arrivals)


def rank_main(
    rank: int,
    tp_size: int,
    peers: list[Connection],
    carry: bool,
    iterations: int,
    out: Connection,
    names: SglangNames = NAMES,
) -> None:
    """A process's entry point: run the rank, send its :class:`RankRun` back."""
    out.send(run_rank(rank, tp_size, peers, carry, iterations, names))
    out.close()
