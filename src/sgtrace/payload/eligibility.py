"""Whether the hook may switch a speculative worker, and why not (the reason is logged and the
hook then only observes).

Each name is looked up with a default: a release or a worker without it has no such feature
(no adaptive controller, no DP attention), and the hook switches.
"""

from __future__ import annotations

from typing import Any

from .config import HookConfig

DP_ATTENTION = (
    "DP attention is on: every DP rank schedules its own batch and SGLang syncs their forward "
    "modes each step, so ranks switching at different steps would mix speculative and plain "
    "forwards; the hook only observes"
)


def worker_refusal(config: HookConfig, worker: Any) -> str | None:
    """Why the plain off state may not be driven on ``worker`` at all, or None."""
    names = config.names
    if getattr(worker, names.controller_slot, None) is not None:
        return "--speculative-adaptive is on: upstream's controller owns the switch"
    if has_dp_attention(getattr(worker, names.server_args_slot, None), config):
        return DP_ATTENTION
    if getattr(worker, "_hosts_draft", True) is False:
        return "this pipeline stage does not run the draft model"
    return None


def has_dp_attention(server_args: Any, config: HookConfig) -> bool:
    """Whether ``server_args`` turn DP attention on: the switch (``--enable-dp-attention``), or
    from 0.5.22 an attention DP width over one (``--attn-dp-size N``, which the switch is now
    the deprecated spelling of). Missing names (or no server args): off."""
    names = config.names
    size = getattr(server_args, names.dp_attention_size, 1)
    return getattr(server_args, names.dp_attention_flag, False) is True or (
        isinstance(size, int) and size > 1
    )
