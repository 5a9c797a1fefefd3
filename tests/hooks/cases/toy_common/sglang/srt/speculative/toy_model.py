"""The toy "models" behind every test case's EAGLEWorkerV2 (no torch).

The target model is next_token(sequence); the draft model guesses it right when
`draft_is_good`, else proposes token 97, which the target never picks. Verify accepts the
longest correct prefix of the draft plus one bonus token, so the text never depends on how
many steps were drafted: any toggle that loses or repeats a token shows in the output.
"""

from __future__ import annotations

from dataclasses import dataclass

from sglang.srt.managers.utils import GenerationBatchResult


def next_token(sequence: list[int]) -> int:
    return (sum(sequence) * 31 + len(sequence)) % 97


@dataclass
class ServerArgs:
    speculative_algorithm: str = "EAGLE3"
    speculative_num_steps: int = 3
    speculative_eagle_topk: int = 1
    speculative_num_draft_tokens: int = 4
    speculative_adaptive: bool = False
    enable_dp_attention: bool = False
    draft_is_good: bool = False
    tp_size: int = 1


@dataclass
class SpecRuntimeState:
    speculative_num_steps: int
    speculative_num_draft_tokens: int
    graphs: str


class ToyDecoding:
    """Prefill, draft, verify over per-request sequences kept by the worker (like its GPU state).

    A prefill computes every token of the request so far (a retracted request's too); a verify
    runs on the target's TARGET_VERIFY graphs (``_target_worker``: the scheduler's target)."""

    server_args: ServerArgs
    speculative_num_steps: int
    speculative_num_draft_tokens: int
    _target_worker: object

    def init_toy(self) -> None:
        self.sequences: dict[int, list[int]] = {}
        self.captured: list[str] = []

    def prefill(self, batch) -> GenerationBatchResult:
        tokens = []
        for req in batch.reqs:
            self.sequences[req.rid] = list(req.tokens)
            tokens.append([self.emit(req.rid)])
        return GenerationBatchResult(tokens)

    def draft(self, batch) -> list[list[int]]:
        drafts = []
        for req in batch.reqs:
            sequence = list(self.sequences[req.rid])
            guesses = []
            for _ in range(self.speculative_num_steps):
                guess = next_token(sequence) if self.server_args.draft_is_good else 97
                guesses.append(guess)
                sequence.append(guess)
            drafts.append(guesses)
        return drafts

    def verify(self, batch, drafts) -> GenerationBatchResult:
        self._target_worker.model_runner.check_graphs("TARGET_VERIFY")
        tokens, accept_lens = [], []
        for req, guesses in zip(batch.reqs, drafts):
            accepted = []
            for guess in guesses:
                if guess != next_token(self.sequences[req.rid]):
                    break
                accepted.append(self.emit(req.rid))
            accepted.append(self.emit(req.rid))
            tokens.append(accepted)
            accept_lens.append(len(accepted))
        return GenerationBatchResult(tokens, accept_lens, self.speculative_num_draft_tokens)

    def emit(self, rid: str) -> int:
        token = next_token(self.sequences[rid])
        self.sequences[rid].append(token)
        return token
