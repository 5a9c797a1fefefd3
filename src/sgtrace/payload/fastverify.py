"""The zero-step state's one-token verify, attended as a decode step.

As upstream builds it, the zero-step state's one-token TARGET_VERIFY runs the triton backend's
extend kernel, which walks the prefix serially: many times slower than a decode's attention. A
one-token verify is a decode, though: the token's KV slot is already the next entry of its
request's row in ``req_to_token`` (the verify assigns ``out_cache_loc`` from there), so the
metadata of a DECODE batch with ``seq_lens + 1`` is exact, and ``forward_decode`` writes the
token's KV and attends over the whole row, in the eager path and in the captured CUDA graphs
alike. Only the state's own backend changes; the launch state and every other mode are untouched.
The SGLang names it reaches (the runner's backend factory, the backend's decode API) come from
the config (:class:`~.config.SglangNames`).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

from .config import SglangNames
from .patcher import Patches


@contextlib.contextmanager
def verify_as_decode(runner: Any, names: SglangNames) -> Iterator[list[str]]:
    """While the zero-step state is built, give its new target backends the decode kernel.

    ``build_adaptive_runtime_state`` makes the state's backends with the model runner's
    ``_get_attention_backend`` and captures their CUDA graphs at once, so the kernel is chosen
    there, on each backend as it is made. Yields the list of what was done, one
    ``"Class: decode kernel"`` per backend changed; the runner is put back on exit.
    """
    done: list[str] = []
    factory = names.get_attention_backend
    original = getattr(runner, factory, None)
    if original is None or factory in vars(runner):
        yield done
        return

    def build(*args: Any, **kwargs: Any) -> Any:
        backend = original(*args, **kwargs)
        if decodes_one_token_verify(backend, names):
            _verify_as_decode(backend, names)
            done.append(f"{type(backend).__name__}: decode kernel")
        return backend

    patches = Patches()
    patches.set_attr(runner, factory, build)
    try:
        yield done
    finally:
        patches.undo()


def decodes_one_token_verify(backend: Any, names: SglangNames) -> bool:
    """A triton-family backend (it has a decode kernel) verifying one token of a topk-1 chain."""
    return (
        getattr(backend, names.backend_draft_tokens, None) == 1
        and getattr(backend, "topk", None) == 1
        and callable(getattr(backend, names.backend_decode_kernel, None))
        and all(callable(getattr(type(backend), name, None)) for name in names.backend_decode_api)
    )


def _verify_as_decode(backend: Any, names: SglangNames) -> None:
    """Run ``backend``'s one-token TARGET_VERIFY attention as a decode step's (instance-level:
    ``init_forward_metadata`` eager, ``init_forward_metadata_out_graph`` at capture and replay)."""
    api = names.backend_decode_api
    metadata, out_graph, extend, decode = (getattr(backend, name) for name in api)

    def as_decode(batch: Any) -> Any:
        if not batch.forward_mode.is_target_verify():
            return batch
        view = copy.copy(batch)
        view.forward_mode = type(batch.forward_mode).DECODE
        view.spec_info = None
        view.seq_lens = batch.seq_lens + 1
        if getattr(batch, "seq_lens_sum", None) is not None:
            view.seq_lens_sum = batch.seq_lens_sum + batch.seq_lens.shape[0]
        if getattr(batch, "seq_lens_cpu", None) is not None:
            view.seq_lens_cpu = batch.seq_lens_cpu + 1
        return view

    def init_forward_metadata(forward_batch: Any) -> Any:
        return metadata(as_decode(forward_batch))

    def init_forward_metadata_out_graph(forward_batch: Any, in_capture: bool = False) -> Any:
        return out_graph(as_decode(forward_batch), in_capture=in_capture)

    def forward_extend(
        q: Any, k: Any, v: Any, layer: Any, forward_batch: Any, *a: Any, **kw: Any
    ) -> Any:
        run = decode if forward_batch.forward_mode.is_target_verify() else extend
        return run(q, k, v, layer, forward_batch, *a, **kw)

    setattr(backend, api[0], init_forward_metadata)
    setattr(backend, api[1], init_forward_metadata_out_graph)
    setattr(backend, api[2], forward_extend)
