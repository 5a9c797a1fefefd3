"""What the lean off step checks before it trusts a part: upstream's sampling switches, the
future map's kind, and where two results differ."""

from __future__ import annotations

import sys
from typing import Any

CHECKS = 8  # results of each part compared with upstream's before the part is trusted
PARTS = ("sample", "bonus", "trivial_input", "stubs", "resolve", "stash")
# parts checked together, each group logging once when all its checks agreed
GROUPS = {"step": PARTS[:4], "future map": PARTS[4:]}
# where upstream (0.5.14+) keeps the sampling switches the lean sample does not follow
SPEC_UTILS = "sglang.srt.speculative.spec_utils"
ASYNC_PROBE = "sglang.srt.utils.async_probe"


def upstream_knobs() -> bool:
    """Whether upstream's simulated acceptance or NaN clean-up of logits is on, as upstream read
    them (``SGLANG_SIMULATE_ACC_LEN``, ``SGLANG_SANITIZE_NAN_LOGITS``); True where that cannot
    be told, so that upstream samples."""
    spec_utils, async_probe = sys.modules.get(SPEC_UTILS), sys.modules.get(ASYNC_PROBE)
    simulate = getattr(spec_utils, "SIMULATE_ACC_LEN", None)
    sanitize = getattr(
        getattr(getattr(async_probe, "envs", None), "SGLANG_SANITIZE_NAN_LOGITS", None), "get", None
    )
    if not isinstance(simulate, (int, float)) or not callable(sanitize):
        return True
    return simulate > 0 or bool(sanitize())


def relays_topk_only(future_map: Any) -> bool:
    """A future map relaying EAGLE top-k drafts and nothing more (no draft probabilities, not
    ngram; its buffers are chosen when it is built). DSA indices, whose buffer comes with the
    first payload holding them, are looked at on each step."""
    return (
        bool(getattr(future_map, "need_topk", False))
        and getattr(future_map, "draft_probs_buf", None) is None
        and not future_map.spec_algo.is_ngram()
    )


def difference(torch: Any, a: Any, b: Any, where: str = "") -> str | None:
    """Where ``a`` and ``b`` differ (tensors by shape, dtype and values), or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{where or 'fields'}: {sorted(a.keys() ^ b.keys())}"
        pairs = [(f"{where}.{k}", a[k], b[k]) for k in a]
    elif isinstance(a, tuple | list) and isinstance(b, tuple | list):
        if len(a) != len(b):
            return f"{where or 'result'}: {len(a)} against {len(b)} items"
        pairs = [(f"{where}[{i}]", x, y) for i, (x, y) in enumerate(zip(a, b, strict=True))]
    elif isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{where}: {tuple(a.shape)} {a.dtype} against {tuple(b.shape)} {b.dtype}"
        return None if a is b or torch.equal(a, b) else f"{where}: values"
    else:
        return None if a == b else f"{where}: {a!r} against {b!r}"
    for name, x, y in pairs:
        found = difference(torch, x, y, name)
        if found is not None:
            return found
    return None
