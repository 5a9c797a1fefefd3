"""What the hook reads from SGLang's objects: the accept lengths of a result, a worker's rank,
the requests still running after a result and the new ones among those received."""

from __future__ import annotations

import math
import sys
from typing import Any


def accept_lengths(result: Any) -> tuple[float, ...] | None:
    """Accepted tokens per request (bonus included) of a speculative verify, else None.

    A result that drafted nothing has none: a plain decode (the hook's off state, no accept
    lengths) or upstream's own one-token zero-step verify (width 1). Rows below 1 (no verify
    ran for them) are dropped; an infinite one raises ValueError (the hook, which builds its
    :class:`~.policy.Observation` unchecked from these, then stops deciding, as the check would).
    """
    width = getattr(result, "speculative_num_draft_tokens", None)
    lens = getattr(result, "accept_lens", None)
    if lens is None or (width is not None and width <= 1):
        return None
    values = lens.tolist() if hasattr(lens, "tolist") else list(lens)
    kept = tuple(float(v) for v in values if v >= 1)
    if kept and max(kept) == math.inf:
        raise ValueError(f"accept lengths must be finite numbers: {kept!r}")
    return kept or None


def unfinished(reqs: Any) -> int:
    """The requests of a decode batch not finished by its result (``Req.finished()``; one
    without it counts as running)."""
    count = 0
    for req in reqs:
        done = getattr(req, "finished", None)
        count += not (callable(done) and done())
    return count


def count_lengths(received: Any, counts: dict[int, int]) -> None:
    """Count into ``counts``, by ``max_new_tokens``, the generation requests among ``received``
    that finish by length (``sampling_params.ignore_eos``): the cohorts of :mod:`.cohort`."""
    for item in _generation_items(received):
        for req in item.batch if isinstance(getattr(item, "batch", None), list) else (item,):
            params = getattr(req, "sampling_params", None)
            tokens = getattr(params, "max_new_tokens", None)
            if (
                getattr(params, "ignore_eos", False) is True
                and isinstance(tokens, int)
                and tokens > 0
            ):
                counts[tokens] = counts.get(tokens, 0) + 1


def generate_requests(received: Any) -> int:
    """The generation requests among what the scheduler received in one loop iteration: its
    ``Tokenized...GenerateReqInput`` objects, a batch of them (``batch``) counting each; control
    messages (aborts, flushes, weight updates) and embeddings count nothing."""
    count = 0
    for item in _generation_items(received):
        batch = getattr(item, "batch", None)
        count += len(batch) if isinstance(batch, list) else 1
    return count


def _generation_items(received: Any) -> list[Any]:
    """The ``...GenerateReqInput`` objects (one request or a batch) among ``received``."""
    if not isinstance(received, list):
        return []
    return [item for item in received if "GenerateReqInput" in type(item).__name__]


def rank_of(worker: Any) -> int:
    """The TP rank of this worker: its own attribute, its ParallelState, or torch's world rank."""
    rank = getattr(worker, "tp_rank", None)
    if rank is None:
        rank = getattr(getattr(worker, "ps", None), "tp_rank", None)
    dist = sys.modules.get("torch.distributed")
    if rank is None and dist is not None and dist.is_available() and dist.is_initialized():
        rank = dist.get_rank()
    return -1 if rank is None else int(rank)
