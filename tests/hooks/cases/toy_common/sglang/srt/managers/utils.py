"""The result of one forward of the toy worker."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class GenerationBatchResult:
    next_token_ids: list[list[int]]
    accept_lens: list[int] | None = None
    speculative_num_draft_tokens: int | None = None
