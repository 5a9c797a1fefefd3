"""Stand-ins for what the plain off state (payload/plainoff.py) touches in SGLang: requests,
batches, the scheduler, the speculative worker, its target's model runner, the future map, and
the function that gives a request's KV back, and SGLang's abort message.

:data:`NAMES` are the plain off state's names with every module pointed at this one, so that a
hook (patch delivery: wrapped at attach, as the module is imported already) wraps the
scheduler's methods here; a test must close the hook (``registry.uninstall``) to put them back.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

from sgtrace.sglang.plain_names import plain_off_names

RELEASED: list[tuple[str, bool]] = []  # (request, is_insert) of every release_kv_cache call
CAPTURED: list[tuple[Any, Any]] = []  # what the model runner held while its graphs were captured


def release_kv_cache(req: Any, tree: Any, is_insert: bool) -> None:
    RELEASED.append((req.rid, is_insert))


def reset() -> None:
    """Forget what was released and captured."""
    RELEASED.clear()
    CAPTURED.clear()


class Algorithm(enum.Enum):
    NONE = "none"
    EAGLE3 = "eagle3"

    def is_none(self) -> bool:
        return self is Algorithm.NONE


@dataclass
class Req:
    rid: str
    done: bool = False
    is_retracted: bool = False

    def finished(self) -> bool:
        return self.done

    def reset_for_retract(self) -> None:
        self.is_retracted = True


@dataclass(frozen=True)
class AbortReq:
    """SGLang's abort message: one request (or those whose id starts so), or all."""

    rid: str = ""
    abort_all: bool = False


@dataclass
class Batch:
    reqs: list[Req]
    spec_algorithm: Algorithm = Algorithm.EAGLE3
    batch_is_full: bool = False

    def filter_batch(self, keep_indices: list[int]) -> None:
        self.reqs = [self.reqs[i] for i in keep_indices]


class Runner:
    def __init__(self) -> None:
        self.spec_algorithm = Algorithm.EAGLE3
        self.attn_backend = "verify-backend"
        self.decode_cuda_graph_runner = "verify-graphs"
        self.graph_mem_usage = 1.0

    def _get_attention_backend(self) -> str:
        return "decode-backend"

    def init_device_graphs(self) -> None:  # the map's first alternative (until 0.5.13)
        CAPTURED.append((self.spec_algorithm, self.attn_backend))
        self.decode_cuda_graph_runner = "decode-graphs"
        self.graph_mem_usage = 2.0


@dataclass
class Target:
    model_runner: Runner = field(default_factory=Runner)


@dataclass
class FutureMap:
    device: str
    spec_algo: Algorithm
    relay_topk: bool = False

    def __post_init__(self) -> None:
        self.buffer = [f"{self.spec_algo.value} buffer"]  # what its algorithm allocates


@dataclass(frozen=True)
class ServerArgs:
    """The server args the hook reads: TP size, and whether DP attention is on (the switch, or
    from 0.5.22 an attention DP width over one)."""

    tp_size: int = 1
    enable_dp_attention: bool = False
    attn_dp_size: int = 1


class Worker:
    """``EAGLEWorkerV2`` as the hook sees it."""

    def __init__(self, rank: int = 0, tp_size: int = 1, server_args: Any = None) -> None:
        self._target_worker = Target()
        self.tp_rank = rank
        self.server_args = ServerArgs(tp_size) if server_args is None else server_args
        self.adaptive_controller: object = None


class Scheduler:
    """The scheduler's attributes and methods the plain off state uses, under SGLang's names."""

    def __init__(self, worker: Any) -> None:
        self.tree_cache = "tree"
        self.spec_algorithm = Algorithm.EAGLE3
        self.tp_worker = worker._target_worker
        self.model_worker = worker
        self.future_map = FutureMap("cuda", self.spec_algorithm, relay_topk=True)
        self.waiting_queue: list[Req] = []
        self.running_batch = Batch([])
        self.processed = 0
        self.answered: list[str] = []  # the requests whose abort was sent to the tokenizer

    def _add_request_to_queue(self, req: Req, is_retracted: bool = False) -> None:
        assert is_retracted
        self.waiting_queue.append(req)

    def abort_request(self, recv_req: AbortReq) -> None:
        """SGLang's abort handler, reduced: queued requests are popped and answered, running
        ones marked to finish at their next step."""
        to_del = [
            i
            for i, req in enumerate(self.waiting_queue)
            if recv_req.abort_all or req.rid.startswith(recv_req.rid)
        ]
        for i in reversed(to_del):
            self.answered.append(self.waiting_queue.pop(i).rid)
        for req in self.running_batch.reqs:
            if not req.finished() and (recv_req.abort_all or req.rid.startswith(recv_req.rid)):
                req.done = True

    def get_new_batch_prefill(self, running_batch: Batch) -> str:
        return "prefill planned"

    def process_batch_result(self, batch: Any, result: Any) -> None:
        self.processed += 1

    def stream_output(self) -> Any:
        """Streams outputs; until 0.5.12 it reads the scheduler's own algorithm."""
        return self.spec_algorithm

    def decode_result(self, batch: Any, result: Any) -> None:
        """The decide site: SGLang hands a decode result over here."""


NAMES = dataclasses.replace(
    plain_off_names(),
    switch_module=__name__,
    switch_qualname="Scheduler.get_new_batch_prefill",
    result_qualname="Scheduler.process_batch_result",
    release_module=__name__,
    future_map_module=__name__,
    output_module=__name__,
    output_qualname="Scheduler.stream_output",
)
