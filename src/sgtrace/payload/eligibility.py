"""Whether the hook may switch a speculative worker, and why not (the reason is logged and the
hook then only observes)."""

from __future__ import annotations

import importlib
from typing import Any

from .config import HookConfig


def worker_refusal(config: HookConfig, worker: Any) -> str | None:
    """Why no off state may be driven on ``worker`` at all, or None."""
    if getattr(worker, config.names.controller_slot, None) is not None:
        return "--speculative-adaptive is on: upstream's controller owns the switch"
    if getattr(worker, "_hosts_draft", True) is False:
        return "this pipeline stage does not run the draft model"
    return None


def zero_step_refusal(config: HookConfig, worker: Any) -> str | None:
    """Why ``worker`` cannot be switched to upstream's zero-step state, or None when it can."""
    if not config.can_switch or config.unsupported_reason is None:
        return f"{config.source}: {config.family_reason}"
    refused = worker_refusal(config, worker)
    if refused is not None:
        return refused
    topk = getattr(worker, "topk", None)
    steps = getattr(worker, "speculative_num_steps", None)
    drafts = getattr(worker, "speculative_num_draft_tokens", None)
    if topk != 1 or not isinstance(steps, int) or steps < 1 or drafts != steps + 1:
        return (
            f"speculative_eagle_topk={topk}, num_steps={steps}, num_draft_tokens={drafts}: "
            "the zero-step state needs topk 1 and num_draft_tokens = num_steps + 1"
        )
    where = config.unsupported_reason
    check = getattr(importlib.import_module(where.module), where.qualname, None)
    if check is None:
        return f"{where.module} has no {where.qualname}"
    upstream = check(worker.server_args)
    return None if upstream is None else f"upstream adaptive machinery refuses: {upstream}"
