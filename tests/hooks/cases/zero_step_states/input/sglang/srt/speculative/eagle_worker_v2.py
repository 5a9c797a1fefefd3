"""A toy EAGLEWorkerV2 with upstream's adaptive protocol, shaped like SGLang 0.5.14+."""

from __future__ import annotations

from sglang.srt.speculative.adaptive_runtime_state import AdaptiveController
from sglang.srt.speculative.toy_model import ServerArgs, SpecRuntimeState, ToyDecoding


class BaseSpecWorker:
    def init_cuda_graphs(self) -> None:
        self.captured.append("launch")

    def activate_step_by_batch(self, batch_size: int) -> None:
        pass


class EAGLEWorkerV2(BaseSpecWorker, ToyDecoding):
    def __init__(self, server_args: ServerArgs, target_worker, tp_rank: int = 0) -> None:
        self.server_args = server_args
        self.tp_rank = tp_rank
        self.topk = server_args.speculative_eagle_topk
        self.speculative_num_steps = server_args.speculative_num_steps
        self.speculative_num_draft_tokens = server_args.speculative_num_draft_tokens
        self._target_worker = target_worker
        self.adaptive_controller: AdaptiveController | None = None
        if server_args.speculative_adaptive:
            self.adaptive_controller = AdaptiveController(self)
        self.init_toy()

    def init_cuda_graphs(self) -> None:
        super().init_cuda_graphs()
        if self.adaptive_controller is not None:
            self.adaptive_controller.register(
                SpecRuntimeState(
                    self.speculative_num_steps, self.speculative_num_draft_tokens, "launch"
                )
            )
            self.adaptive_controller.init_states(cuda_graph_bs=[1, 2, 4, 8, 16, 32, 64])

    def forward_batch_generation(self, batch):
        if batch.forward_mode.is_extend() or batch.is_extend_in_batch:
            return self.prefill(batch)
        else:
            self.activate_step_by_batch(len(batch.reqs))
            if self.speculative_num_steps == 0:
                drafts = self._build_trivial_verify_input(batch)
            else:
                drafts = self.draft(batch)
            return self.verify(batch, drafts)

    def _build_trivial_verify_input(self, batch) -> list[list[int]]:
        return [[] for _ in batch.reqs]

    def activate_step_by_batch(self, batch_size: int) -> None:
        if self.adaptive_controller is not None:
            self.adaptive_controller.activate_step_by_batch(batch_size)

    def build_adaptive_runtime_state(
        self, speculative_num_steps, speculative_num_draft_tokens, cuda_graph_bs=None
    ) -> SpecRuntimeState:
        self.captured.append(f"steps={speculative_num_steps} bs={cuda_graph_bs}")
        return SpecRuntimeState(
            speculative_num_steps, speculative_num_draft_tokens, f"steps={speculative_num_steps}"
        )

    def apply_runtime_state(self, state: SpecRuntimeState) -> None:
        if self.speculative_num_steps == state.speculative_num_steps:
            return
        self.speculative_num_steps = state.speculative_num_steps
        self.speculative_num_draft_tokens = state.speculative_num_draft_tokens
