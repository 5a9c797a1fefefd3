"""KV slots of the toy: each request holds slots from its prefill until it is released.

``release_kv_cache`` is upstream's name and signature (``is_insert``: the committed tokens go into
the radix cache, which the toy does not model). A request allocated twice without a release in
between is a leak, and fails at once.
"""

from __future__ import annotations


class TreeCache:
    """The slots each request holds (the toy's KV pool and radix cache in one)."""

    def __init__(self) -> None:
        self.held: dict[str, int] = {}

    def allocate(self, req, slots: int) -> None:
        if req.rid in self.held:
            raise RuntimeError(f"request {req.rid} allocated again without a release: KV leak")
        self.held[req.rid] = slots

    def grow(self, req, slots: int) -> None:
        self.held[req.rid] += slots


def release_kv_cache(req, tree_cache: TreeCache, is_insert: bool = True) -> None:
    """Give the request's slots back (a finished or retracted request)."""
    del tree_cache.held[req.rid]
