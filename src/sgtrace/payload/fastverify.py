"""The zero-step state's one-token verify, attended as a decode step.

As upstream builds it, the zero-step state's one-token TARGET_VERIFY runs the triton backend's
extend kernel, which walks the prefix serially: many times slower than a decode's attention. A
one-token verify is a decode, though: the token's KV slot is already the next entry of its
request's row in ``req_to_token`` (the verify assigns ``out_cache_loc`` from there), so the
metadata of a DECODE batch with ``seq_lens + 1`` is exact, and ``forward_decode`` writes the
token's KV and attends over the whole row, in the eager path and in the captured CUDA graphs
alike. Only the state's own backend changes; the launch state and every other mode are untouched.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

from .patcher import Patches

_DECODE_API = (
    "init_forward_metadata",
    "init_forward_metadata_out_graph",
    "forward_extend",
    "forward_decode",
)


@contextlib.contextmanager
def verify_as_decode(runner: Any) -> Iterator[list[str]]:
    """While the zero-step state is built, give its new target backends the decode kernel.

    ``build_adaptive_runtime_state`` makes the state's backends with the model runner's
    ``_get_attention_backend`` and captures their CUDA graphs at once, so the kernel is chosen
    there, on each backend as it is made. Yields the list of what was done, one
    ``"Class: decode kernel"`` per backend changed; the runner is put back on exit.
    """
    done: list[str] = []
    original = getattr(runner, "_get_attention_backend", None)
    if original is None or "_get_attention_backend" in vars(runner):
        yield done
        return

    def build(*args: Any, **kwargs: Any) -> Any:
        backend = original(*args, **kwargs)
        if decodes_one_token_verify(backend):
            _verify_as_decode(backend)
            done.append(f"{type(backend).__name__}: decode kernel")
        return backend

    patches = Patches()
    patches.set_attr(runner, "_get_attention_backend", build)
    try:
        yield done
    finally:
        patches.undo()


def decodes_one_token_verify(backend: Any) -> bool:
    """A triton-family backend (it has a decode kernel) verifying one token of a topk-1 chain."""
    return (
        getattr(backend, "num_draft_tokens", None) == 1
        and getattr(backend, "topk", None) == 1
        and callable(getattr(backend, "decode_attention_fwd", None))
        and all(callable(getattr(type(backend), name, None)) for name in _DECODE_API)
    )


def _verify_as_decode(backend: Any) -> None:
    """Run ``backend``'s one-token TARGET_VERIFY attention as a decode step's (instance-level:
    ``init_forward_metadata`` eager, ``init_forward_metadata_out_graph`` at capture and replay)."""
    metadata = backend.init_forward_metadata
    out_graph = backend.init_forward_metadata_out_graph
    extend, decode = backend.forward_extend, backend.forward_decode

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

    backend.init_forward_metadata = init_forward_metadata
    backend.init_forward_metadata_out_graph = init_forward_metadata_out_graph
    backend.forward_extend = forward_extend
