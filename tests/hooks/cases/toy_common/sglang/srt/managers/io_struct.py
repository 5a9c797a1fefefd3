"""Messages between the toy's tokenizer and scheduler (upstream's names)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AbortReq:
    """Abort one request (or those whose id starts with ``rid``), or all of them."""

    rid: str = ""
    abort_all: bool = False
