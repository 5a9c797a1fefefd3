"""Whether the hook may switch a speculative worker, and why not (the reason is logged and the
hook then only observes)."""

from __future__ import annotations

from typing import Any

from .config import HookConfig


def worker_refusal(config: HookConfig, worker: Any) -> str | None:
    """Why the plain off state may not be driven on ``worker`` at all, or None."""
    if getattr(worker, config.names.controller_slot, None) is not None:
        return "--speculative-adaptive is on: upstream's controller owns the switch"
    if getattr(worker, "_hosts_draft", True) is False:
        return "this pipeline stage does not run the draft model"
    return None
