"""One tensor-parallel rank of a toy scheduler loop, run in its own process (multiprocessing).

Each rank runs the real hook (:class:`sgtrace.payload.hook.Hook`, patch delivery) on a worker
as the hook sees ``EAGLEWorkerV2``, and a loop as SGLang's overlap scheduler runs it: receive the
iteration's requests (rank 0 reads them from a schedule and broadcasts them to the other ranks
over pipes, pickled, with a broadcast looked up in the receiving module's globals, as
``recv_requests`` does), launch the next decode batch in the state the controller applies, then
process the previous batch's result (the hook decides). Every rank has its own clock: the
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

from sgtrace.payload import hook as payload_hook
from sgtrace.payload import registry
from sgtrace.payload.config import DEFAULT_OPTIONS, Delivery, HookConfig, SglangNames, SiteRef
from sgtrace.payload.policy import PolicyConfig, PolicyKind
from sgtrace.sglang.family import Family
from sgtrace.sglang.runtime_names import runtime_names

NAMES = runtime_names(Family.ZERO_STEP_STATES)
ACCEPT = 2.5  # speculation pays below about 37 requests on this machine (see step_seconds)


def step_seconds(batch_size: int, spec_on: bool) -> float:
    """The toy machine: a speculative step costs more, and more per request."""
    return 0.006 + 0.0003 * batch_size if spec_on else 0.005 + 0.00005 * batch_size


def schedule(iterations: int) -> list[int]:
    """Rank 0's batch size per iteration: low load, load near the crossover (where each
    rank's noise decides), high load, low load again."""
    rng = random.Random(7)
    levels = [(1, 0.15), (36, 0.45), (96, 0.2), (2, 0.2)]
    out: list[int] = []
    for size, share in levels:
        for _ in range(int(iterations * share)):
            out.append(size if size != 36 else size + rng.randint(0, 6))
    return out + [2] * (iterations - len(out))


@dataclass(frozen=True)
class RankRun:
    """What one rank did: the state of each launch, its decisions as recorded
    ``(step, spec_on, changed, iteration, source_rank)``, its measured periods."""

    rank: int
    launches: tuple[bool, ...]
    records: tuple[tuple[int, bool, bool, int | None, int | None], ...]
    periods: tuple[float | None, ...]


class NoisyClock:
    """``time`` as the hook sees it: ``perf_counter`` read by the hook, advanced by the loop."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now


class Worker:
    """``EAGLEWorkerV2`` as the hook sees it: runtime states applied by step count."""

    def __init__(self, rank: int, tp_size: int) -> None:
        self.speculative_num_steps = 3
        self.speculative_num_draft_tokens = 4
        self.topk = 1
        self.tp_rank = rank
        self.server_args = types.SimpleNamespace(tp_size=tp_size)
        self.adaptive_controller: object = None

    def build_adaptive_runtime_state(self, **kwargs: object) -> types.SimpleNamespace:
        return types.SimpleNamespace(speculative_num_steps=kwargs["speculative_num_steps"])

    def apply_runtime_state(self, state: types.SimpleNamespace) -> None:
        self.speculative_num_steps = state.speculative_num_steps


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
        data = [("batch_size", FEED.pop(0))] if RANK == 0 else None
        if len(PEERS) > 0:
            data = {names.broadcast_requests}(data, RANK, PEERS, src=0)
        return data
"""
    module.__dict__.update(RANK=rank, PEERS=peers, FEED=list(feed))
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
    check = types.ModuleType("fake_adaptive_spec_params")
    check.adaptive_unsupported_reason = lambda server_args: None  # type: ignore[attr-defined]
    sys.modules[check.__name__] = check
    site = SiteRef("fake_scheduler_never_imported", "Processor.decode")
    config = HookConfig(
        "toy", True, "zero-step states", site, site, SiteRef(check.__name__, "adaptive_unsupported_reason"),
        None, Delivery.PATCH, PolicyConfig(kind=PolicyKind.CALIBRATED), DEFAULT_OPTIONS, names,
    )  # fmt: skip
    hook = payload_hook.Hook(config)
    registry.register(registry.PluginKind.HOOK, hook)
    clock = NoisyClock()
    payload_hook.time = clock  # type: ignore[assignment]  # this rank's own clock
    noise = random.Random(1000 + rank)
    worker = Worker(rank, tp_size if carry else 1)  # without the carrier: no fallback either
    payload_hook.attach(worker)
    controller = worker.adaptive_controller
    controller.register(types.SimpleNamespace(speculative_num_steps=3))  # type: ignore[attr-defined]
    controller.init_states(cuda_graph_bs=[1, 64])  # type: ignore[attr-defined]
    receiver = getattr(module, names.receiver_class)()
    batch_size, launches, in_flight = 1, [], None
    for iteration in range(iterations):
        for _kind, size in getattr(receiver, names.receive_requests)() or ():
            batch_size = size
        controller.activate_step_by_batch(batch_size)  # type: ignore[attr-defined]
        spec_on = worker.speculative_num_steps > 0
        launches.append(spec_on)
        launched = (iteration, batch_size, spec_on)
        if in_flight is not None:
            forward_iter, size, was_on = in_flight
            clock.now += step_seconds(size, was_on) * noise.lognormvariate(0.0, 0.1)
            batch = types.SimpleNamespace(
                reqs=[object()] * size,
                forward_iter=forward_iter,
                spec_algorithm=types.SimpleNamespace(is_none=lambda: False),
            )
            result = types.SimpleNamespace(
                speculative_num_draft_tokens=4 if was_on else 1, accept_lens=[ACCEPT] * size
            )
            payload_hook.on_decode_result(batch, result)
        in_flight = launched
    entries = hook.decisions.entries
    records = tuple((r.step, r.spec_on, r.changed, r.iteration, r.source_rank) for r in entries)
    periods = tuple(r.step_period_s for r in entries)
    payload_hook.uninstall()
    return RankRun(rank, tuple(launches), records, periods)


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
