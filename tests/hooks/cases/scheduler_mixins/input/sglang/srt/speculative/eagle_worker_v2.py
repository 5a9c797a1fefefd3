"""A toy EAGLEWorkerV2 without runtime states, shaped like SGLang 0.5.9 to 0.5.12."""

from __future__ import annotations

from sglang.srt.speculative.toy_model import ServerArgs, ToyDecoding


class EAGLEWorkerV2(ToyDecoding):
    def __init__(self, server_args: ServerArgs, target_worker, tp_rank: int = 0) -> None:
        self.server_args = server_args
        self.tp_rank = tp_rank
        self.topk = server_args.speculative_eagle_topk
        self.speculative_num_steps = server_args.speculative_num_steps
        self.speculative_num_draft_tokens = server_args.speculative_num_draft_tokens
        self._target_worker = target_worker
        self.init_toy()

    def init_cuda_graphs(self) -> None:
        self.captured.append("launch")

    def forward_batch_generation(self, batch):
        if batch.forward_mode.is_extend() or batch.is_extend_in_batch:
            return self.prefill(batch)
        else:
            drafts = self.draft(batch)
            return self.verify(batch, drafts)
