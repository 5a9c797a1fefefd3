"""A toy of the target side of SGLang 0.5.14+: which attention kernel a verify runs.

Upstream's ``TritonAttnBackend`` sends every non-decode forward to ``forward_extend`` (the
extend kernel, or the split-KV verify kernel where ``use_verify_splitkv``) and decode batches
to ``forward_decode``; its metadata comes from ``init_forward_metadata`` (eager) and
``init_forward_metadata_out_graph`` (CUDA-graph capture and replay).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Mode(enum.Enum):
    """The forward modes a target attention backend sees (upstream's ForwardMode)."""

    DECODE = "decode"
    TARGET_VERIFY = "target_verify"

    def is_target_verify(self) -> bool:
        return self is Mode.TARGET_VERIFY


class Lens(tuple):
    """Stands in for a 1-D tensor of sequence lengths."""

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)

    def __add__(self, n: int) -> Lens:
        return Lens(x + n for x in self)


@dataclass
class ForwardBatch:
    forward_mode: Mode
    seq_lens: Lens
    seq_lens_sum: int | None = None
    spec_info: object = "verify input"


class TritonAttnBackend:
    """The parts of upstream's triton backend that decide which kernel a verify runs."""

    def __init__(self, topk: int, num_draft_tokens: int) -> None:
        self.topk = topk
        self.num_draft_tokens = num_draft_tokens
        self.use_verify_splitkv = False  # upstream: gfx95 only
        self.forward_metadata = None

    def decode_attention_fwd(self, *args) -> None:
        pass

    def verify_splitkv_fwd(self, *args) -> bool:
        return True

    def init_forward_metadata(self, forward_batch: ForwardBatch) -> None:
        self.init_forward_metadata_out_graph(forward_batch)

    def init_forward_metadata_out_graph(self, forward_batch, in_capture: bool = False) -> None:
        batch = forward_batch
        self.forward_metadata = (batch.forward_mode.value, list(batch.seq_lens), batch.spec_info)

    def forward(self, forward_batch: ForwardBatch) -> str:
        """Upstream's dispatch: decode batches to forward_decode, all others to forward_extend."""
        if forward_batch.forward_mode is Mode.DECODE:
            return self.forward_decode(None, None, None, None, forward_batch)
        return self.forward_extend(None, None, None, None, forward_batch)

    def forward_extend(self, q, k, v, layer, forward_batch, save_kv_cache=True) -> str:
        verify = forward_batch.forward_mode.is_target_verify()
        return "split-kv" if verify and self.use_verify_splitkv else "extend"

    def forward_decode(self, q, k, v, layer, forward_batch, save_kv_cache=True) -> str:
        return "decode"


def probe_verify(backend: TritonAttnBackend, in_capture: bool) -> str:
    """Which kernel a verify of two requests (5 and 7 tokens cached) runs, and its metadata."""
    batch = ForwardBatch(Mode.TARGET_VERIFY, Lens([5, 7]), 12)
    if in_capture:
        backend.init_forward_metadata_out_graph(batch, in_capture=True)
    else:
        backend.init_forward_metadata(batch)
    return f"verify={backend.forward(batch)} metadata={backend.forward_metadata}"


class ModelRunner:
    def __init__(self, topk: int, num_draft_tokens: int) -> None:
        self.topk = topk
        self.num_draft_tokens = num_draft_tokens
        self.attn_backend = self._get_attention_backend()

    def _get_attention_backend(self, init_new_workspace: bool = False) -> TritonAttnBackend:
        return TritonAttnBackend(self.topk, self.num_draft_tokens)


class TpModelWorker:
    def __init__(self, topk: int, num_draft_tokens: int) -> None:
        self.model_runner = ModelRunner(topk, num_draft_tokens)
