"""What the lean off step checks before it trusts a part: upstream's sampling switches, the
future map's kind, and where two results differ."""

from __future__ import annotations

import sys
from typing import Any

from .config import SglangNames

CHECKS = 8  # results of each part compared with upstream's before the part is trusted
PARTS = ("sample", "bonus", "trivial_input", "stubs", "resolve", "relay_stash")
# parts checked together, each group logging once when all its checks agreed
GROUPS = {"step": PARTS[:4], "future map": PARTS[4:]}


def upstream_knobs(names: SglangNames) -> bool:
    """Whether upstream's simulated acceptance or NaN clean-up of logits is on, as upstream read
    them (``SGLANG_SIMULATE_ACC_LEN``, ``SGLANG_SANITIZE_NAN_LOGITS``, in the modules
    ``names`` gives: upstream's 0.5.14+ ``spec_utils`` and ``async_probe``); True where that
    cannot be told, so that upstream samples."""
    spec_utils = sys.modules.get(names.spec_utils_module)
    async_probe = sys.modules.get(names.async_probe_module)
    simulate = getattr(spec_utils, names.simulate_acc_len, None)
    envs = getattr(async_probe, names.async_probe_envs, None)
    sanitize = getattr(getattr(envs, names.sanitize_nan_logits, None), "get", None)
    if not isinstance(simulate, (int, float)) or not callable(sanitize):
        return True
    return simulate > 0 or bool(sanitize())


def relays_topk_only(future_map: Any, names: SglangNames) -> bool:
    """A future map relaying EAGLE top-k drafts and nothing more (no draft probabilities, not
    ngram; its buffers are chosen when it is built). DSA indices, whose buffer comes with the
    first payload holding them, are looked at on each step."""
    return (
        bool(getattr(future_map, names.future_map_topk_flag, False))
        and getattr(future_map, "draft_probs_buf", None) is None
        and not getattr(future_map, names.future_map_algorithm).is_ngram()
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
