"""The overlap scheduler's relay between iterations (a toy of upstream's ``FutureMap``): what it
relays depends on the algorithm it was built for."""

from __future__ import annotations


class FutureMap:
    def __init__(self, max_running_requests: int, device: str, spec_algo) -> None:
        self.spec_algo = spec_algo
        self.relays = "next tokens" if spec_algo.is_none() else "draft inputs"
