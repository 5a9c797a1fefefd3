"""The target model's runner (toy): its algorithm, attention backend and CUDA graphs.

A speculative server's target captures TARGET_VERIFY graphs; a plain decode needs DECODE
graphs, captured for algorithm NONE on their own backend. Running a step on graphs of the other
kind fails, as it would on a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Graphs:
    mode: str  # "DECODE" or "TARGET_VERIFY"
    backend: object  # the attention backend they were captured on


class ModelRunner:
    def __init__(self, spec_algorithm) -> None:
        self.spec_algorithm = spec_algorithm
        self.attn_backend = self._get_attention_backend()
        self.graph_runner: Graphs | None = None
        self.init_decode_cuda_graph()

    def _get_attention_backend(self) -> object:
        return object()  # a backend of its own

    def init_decode_cuda_graph(self) -> None:
        """Capture the graphs the algorithm needs, on the runner's backend."""
        mode = "DECODE" if self.spec_algorithm.is_none() else "TARGET_VERIFY"
        self.graph_runner = Graphs(mode, self.attn_backend)

    def check_graphs(self, mode: str) -> None:
        """A step of ``mode`` runs on graphs captured for it, on the backend in place."""
        graphs = self.graph_runner
        if graphs is None or graphs.mode != mode or graphs.backend is not self.attn_backend:
            raise RuntimeError(f"a {mode} step on {graphs}: the runner was not switched")
