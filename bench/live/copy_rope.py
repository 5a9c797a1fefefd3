"""The RoPE arithmetic by which the copy model's attention reads one position back: a query
reads the key ``lag`` positions before it (``make_copy_model.py``'s target, layer 0, and
``make_copy_draft.py``'s lag draft).

``q`` and ``k`` are constant (read from the embedding's constant coordinate), ``k`` rotated by
``lag`` positions against ``q`` in RoPE's (neox) pairs, so the score ``sum_i |q_i|^2 cos(theta_i
(m - n - lag))`` peaks at key ``n = m - lag`` by ``PEAK_LOGIT`` after scaling (softmax weight
elsewhere below e^-60 per key).
"""

from __future__ import annotations

import math

import torch

ROPE_THETA = 10000.0
PEAK_LOGIT = 60.0  # the score margin (after 1/sqrt(head_dim)) of the copied position


def rope_pairs(head_dim, lag, max_len):
    """The RoPE pairs ``q``/``k`` use (the high frequencies), each weight ``|q_i|^2``, and the
    relative score margin ``min_{d != lag} (peak - score(d)) / peak`` over ``d = m - n`` in
    ``[0, max_len)``: query ``m`` reads key ``m - lag``."""
    theta = rope_theta(head_dim)
    use = theta > 0.2
    d = torch.arange(0, max_len, dtype=torch.float64)
    score = torch.cos(torch.outer(d - lag, theta[use])).sum(1)
    peak = float(use.sum())
    gap = peak - float(score[d != lag].max())
    scale = PEAK_LOGIT * math.sqrt(head_dim) / gap  # |q_i|^2 on every used pair
    return use, theta, scale, gap / peak


def lagged_qk(head_dim, lag, max_len):
    """One head's ``q`` and ``k`` rows (``head_dim`` each) on the constant coordinate: the
    query of position ``m`` peaks at the key of position ``m - lag``."""
    use, theta, q2, _ = rope_pairs(head_dim, lag, max_len)
    qmag = math.sqrt(q2)
    cols = torch.nonzero(use).flatten()
    rot = theta[use] * lag
    q, k = torch.zeros(head_dim), torch.zeros(head_dim)
    q[cols] = qmag  # neox pairs: (i, i + head_dim/2) is Re, Im
    k[cols] = qmag * torch.cos(rot).float()
    k[head_dim // 2 + cols] = qmag * torch.sin(rot).float()
    return q, k


def rope(x, pos, theta):
    """Neox RoPE on ``x`` (positions x heads x head_dim) at integer positions ``pos``."""
    half = x.shape[-1] // 2
    ang = torch.outer(pos.double(), theta).float()[:, None, :]
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    return torch.cat([x1 * ang.cos() - x2 * ang.sin(), x2 * ang.cos() + x1 * ang.sin()], -1)


def rope_theta(head_dim):
    """RoPE's frequencies for ``head_dim`` (``ROPE_THETA`` base), float64."""
    return ROPE_THETA ** (-torch.arange(head_dim // 2, dtype=torch.float64) * 2 / head_dim)
