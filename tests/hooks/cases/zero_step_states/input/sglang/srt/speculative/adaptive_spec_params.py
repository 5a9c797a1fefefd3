"""Which server arguments the toy adaptive machinery supports."""

from __future__ import annotations


def adaptive_unsupported_reason(server_args) -> str | None:
    if server_args.speculative_algorithm not in ("EAGLE", "EAGLE3"):
        return f"speculative_algorithm={server_args.speculative_algorithm}"
    return None
