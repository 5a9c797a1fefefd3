"""The copy model's lag draft: an EAGLE-3 draft whose every proposal is read from its own KV of
an earlier position, so a switch on that leaves the draft KV of the tokens decoded while off
unwritten (a cold start) costs it proposals (issue 20's re-entry run;
``make_copy_model.py --draft-lag L``).

SGLang 0.5.16's EAGLE-3 draft (``llama_eagle3.py``, one ``LlamaDecoderLayer``), as used here:
draft position ``p`` gets the token ``x_{p+1}`` and the target's aux hidden states of ``p``
(``fc`` of them; at later draft steps, its own pre-norm output instead), and proposes
``x_{p+2}``. The residual is that hidden; attention reads ``cat(input_layernorm(embed),
hidden_norm(hidden))``; the MLP is added, then ``norm`` and ``lm_head``. The first proposal
of each decode result comes from the draft extend at the last accepted position (its attention
sees the draft KV of every earlier position), the next ``NUM_STEPS - 1`` from draft decode steps
at the positions after it (they see the committed draft KV and the steps' own).

* **Copy heads** (the first ``n = hidden / 2 / head_dim``): ``q``/``k`` read the embedding's
  constant coordinate, rotated so that position ``m`` reads the KV of ``m - L``
  (``copy_rope.py``); ``v`` copies the token features (half A) of the normalized embedding of
  that position's input, ``x_{m-L+1}``, and ``o_proj`` writes them back to half A. ``lm_head``
  row ``j`` is ``[e[tau(j) - 1], 0]``, so the proposal is ``x_{m-L+1} + 1``, read through the
  known-fraction permutation ``tau`` (``make_synth_models.known_permutation``). Against the
  target's ``next(seq) = seq[-D] + 1``, ``x_{m+2} = x_{m+2-D} + 1``: right iff ``D = L + 1``,
  and only where the draft KV of ``m - L`` holds its token.
* **Echo heads** (the other ``n``, lag 0): ``v`` copies the normalized incoming hidden,
  ``o_proj`` subtracts it at its RMS (``sqrt((H - 1) / H)``). At a draft decode step the
  hidden is the previous step's output, which the residual would add to this step's copy (an
  exact tie in ``lm_head`` between the two tokens, broken by rounding); the echo cancels it, so
  every step proposes from its own KV read. In the draft extend the hidden is ``fc(...) = 0``
  and the echo is 0.
* ``fc``, the MLP are 0; the norms are 1; ``d2t`` is 0 (draft ids are target ids). The draft
  embeds with the target's ``embed_tokens`` (SGLang's ``set_embed`` for EAGLE-3 drafts without
  ``load_lm_head_from_target``), so none is written.

Steady state, every proposal is right exactly when its token is known: accept length
``1 + q + q^2 + q^3`` of 4 (``q = --known``). Switching on without the catch-up, the first
proposal reads a position decoded while off for the first ``L`` results (each then accepts
nothing, so advances one token): accept length 1 there.

:func:`check` runs that arithmetic on the bf16 weights (see its docstring).
"""

from __future__ import annotations

import math

import torch
from copy_rope import lagged_qk, rope, rope_theta
from make_synth_models import NUM_STEPS, rms_norm


def heads(a):
    """(head_dim, copy heads): the copy heads' values cover half A, as many echo heads."""
    hd, half = a.hidden // a.heads, a.hidden // 2
    assert half % hd == 0, "head_dim must divide hidden / 2"
    return hd, half // hd


def config_overrides(a):
    """The lag draft's attention shape, where it differs from the target's."""
    hd, n = heads(a)
    return {"num_attention_heads": 2 * n, "num_key_value_heads": 2 * n, "head_dim": hd}


def weights(a, emb, tau):
    """The lag draft's weights for the target's embeddings ``emb`` (float32)."""
    h, half = a.hidden, a.hidden // 2
    hd, n = heads(a)
    const = h - 2  # the embedding's constant coordinate
    q = torch.zeros(2 * n * hd, 2 * h)
    k = torch.zeros(2 * n * hd, 2 * h)
    v = torch.zeros(2 * n * hd, 2 * h)
    o = torch.zeros(h, 2 * n * hd)
    echo = math.sqrt((h - 1) / h)  # the RMS over h of a token's features (norm^2 = h - 1)
    for g in range(2 * n):
        is_copy = g < n
        rows, out = slice(g * hd, (g + 1) * hd), slice((g % n) * hd, (g % n + 1) * hd)
        q[rows, const], k[rows, const] = lagged_qk(hd, a.draft_lag if is_copy else 0, a.max_len)
        src = (g % n) * hd + (0 if is_copy else h)  # the embedding's half A, or the hidden's
        v[rows, src : src + hd] = torch.eye(hd)
        o[out, rows] = torch.eye(hd) * (1.0 if is_copy else -echo)
    lm_head = torch.zeros(a.vocab, h)
    lm_head[:, :half] = torch.roll(emb, 1, dims=0)[tau][:, :half]  # row j reads e[tau(j) - 1]
    m = "midlayer."
    return {
        "fc.weight": torch.zeros(h, 3 * h),
        "norm.weight": torch.ones(h),
        "lm_head.weight": lm_head,
        "d2t": torch.zeros(a.vocab, dtype=torch.int64),
        "t2d": torch.ones(a.vocab, dtype=torch.bool),
        m + "self_attn.q_proj.weight": q,
        m + "self_attn.k_proj.weight": k,
        m + "self_attn.v_proj.weight": v,
        m + "self_attn.o_proj.weight": o,
        m + "mlp.gate_proj.weight": torch.zeros(a.inter, h),
        m + "mlp.up_proj.weight": torch.zeros(a.inter, h),
        m + "mlp.down_proj.weight": torch.zeros(h, a.inter),
        m + "input_layernorm.weight": torch.ones(h),
        m + "hidden_norm.weight": torch.ones(h),
        m + "post_attention_layernorm.weight": torch.ones(h),
    }


class DraftLayer:
    """SGLang's EAGLE-3 draft layer on the bf16 weights, a row per query position."""

    def __init__(self, a, emb, dw):
        self.bf = {key: t.to(torch.bfloat16) for key, t in dw.items() if t.is_floating_point()}
        self.emb = emb.to(torch.bfloat16)  # the target's embed_tokens
        self.hd, n = heads(a)
        self.nh = 2 * n
        self.theta = rope_theta(self.hd)
        self.hot = dw["d2t"] + torch.arange(a.vocab)  # SGLang's hot_token_id

    def qkv(self, tokens, hidden, pos):
        """Roped ``q``, ``k`` and ``v`` (rows x heads x head_dim, bf16) of the inputs."""
        m, bf = "midlayer.", self.bf
        x = torch.cat(
            [
                rms_norm(self.emb[tokens], bf[m + "input_layernorm.weight"]),
                rms_norm(hidden, bf[m + "hidden_norm.weight"]),
            ],
            -1,
        )
        shape = (len(tokens), self.nh, self.hd)
        q = (x @ bf[m + "self_attn.q_proj.weight"].T).view(shape)
        k = (x @ bf[m + "self_attn.k_proj.weight"].T).view(shape)
        v = (x @ bf[m + "self_attn.v_proj.weight"].T).view(shape)
        q, k = rope(q, pos, self.theta), rope(k, pos, self.theta)
        return q.to(torch.bfloat16), k.to(torch.bfloat16), v

    def attend(self, q, keys, values, visible, own=()):
        """Softmax attention of ``q`` over the shared ``keys``/``values`` where ``visible``
        (rows x keys) and over each row's ``own`` (key, value) pairs (draft steps, a stale
        entry), then ``o_proj``."""
        s = torch.einsum("qhd,phd->hqp", q.float(), keys.float())
        s = s.masked_fill(~visible[None], -math.inf)
        extra = [torch.einsum("qhd,qhd->hq", q.float(), k.float())[..., None] for k, _ in own]
        att = torch.softmax(torch.cat([s, *extra], -1) / math.sqrt(self.hd), -1)
        att = att.to(torch.bfloat16).float()
        out = torch.einsum("hqp,phd->qhd", att[..., : keys.shape[0]], values.float())
        for i, (_, v) in enumerate(own):
            out = out + att[..., keys.shape[0] + i].T[..., None] * v.float()
        out = out.to(torch.bfloat16).reshape(len(q), -1)
        return out @ self.bf["midlayer.self_attn.o_proj.weight"].T

    def finish(self, attn_out, residual):
        """Fused add into the residual, the MLP (0), ``norm``, ``lm_head``: the proposal
        (target ids) and the pre-norm output (the next step's hidden)."""
        hidden = (attn_out.float() + residual.float()).to(torch.bfloat16)
        normed = rms_norm(hidden, self.bf["norm.weight"])
        logits = normed.float() @ self.bf["lm_head.weight"].float().T
        return self.hot[logits.argmax(-1)], hidden, logits


def copy_sequence(a, length, gen):
    """Random first ``D`` tokens, then the target's rule ``x_n = x_{n-D} + 1``."""
    ids = torch.randint(3, a.vocab, (length,), generator=gen)
    for n in range(a.offset, length):
        ids[n] = (ids[n - a.offset] + 1) % a.vocab
    return ids


def check(a, emb, dw, tau, sequences=8, length=256):
    """The lag draft's arithmetic on the bf16 weights, on sequences that follow the target's
    rule (offset ``a.offset``). Draft extend over every position (input ``x_{p+1}``, hidden
    ``fc(...) = 0``), then at each position ``q >= L`` the first proposal (causal attention
    over the draft KV of ``0..q``) and ``NUM_STEPS - 1`` draft decode steps (their own KV
    appended, the previous step's output as hidden).

    ``mechanism_wrong``: proposals other than ``tau``'s read-out of the token to come (0 for a
    right build); ``accept_length_checked``: the mean of 1 + the right proposals before the
    first wrong one (expected ``1 + q + q^2 + q^3``). A cold start, the draft KV of ``q - L``
    not its token's: ``cold_first_wrong`` with another token's KV at that position (written
    there by an earlier request), ``cold_zeroed_first_wrong`` with zeros (never written).
    ``stale_twin_first_wrong``: the KV of ``q - L`` right, and one more entry in view that
    another request wrote at position ``q - L`` (a slot of the cold region, reused): its key
    scores as the right one's, so the proposal is either token's (about half wrong)."""
    layer = DraftLayer(a, emb, dw)
    tau_inv = torch.argsort(tau)
    gen = torch.Generator().manual_seed(a.seed + 3)
    lag, steps = a.draft_lag, NUM_STEPS
    stats = {"positions": 0, "mechanism_wrong": 0, "first_right": 0, "accepted": 0,
             "cold_first_wrong": 0, "cold_zeroed_first_wrong": 0,
             "stale_twin_first_wrong": 0}  # fmt: skip
    margins = []
    for _ in range(sequences):
        ids = copy_sequence(a, length, gen)
        p = length - 1  # draft positions 0..p-1, input x_{pos+1}
        pos = torch.arange(p)
        zero = torch.zeros(p, a.hidden, dtype=torch.bfloat16)
        q, k, v = layer.qkv(ids[1:], zero, pos)
        causal = pos[None, :] <= pos[:, None]
        first, hidden, logits = layer.finish(layer.attend(q, k, v, causal), zero)
        rows = torch.arange(lag, length - steps - 1)  # every proposal's token is in ids
        seen = pos[None, :] <= rows[:, None]  # the committed draft KV of 0..q
        want = [ids[rows + 1 + s] for s in range(1, steps + 1)]
        props, hid, own = [first[rows]], hidden[rows], []
        for s in range(1, steps):
            qs, ks, vs = layer.qkv(props[-1], hid, rows + s)
            own.append((ks, vs))
            prop, hid, _ = layer.finish(layer.attend(qs, k, v, seen, own), hid)
            props.append(prop)
        alive = torch.ones(len(rows), dtype=torch.bool)
        accepted = torch.zeros(len(rows))
        for prop, w in zip(props, want, strict=True):
            stats["mechanism_wrong"] += int((prop != tau_inv[w]).sum())
            alive &= prop == w
            accepted += alive.float()
        stats["positions"] += len(rows)
        stats["first_right"] += int((props[0] == want[0]).sum())
        stats["accepted"] += float(accepted.sum())
        top2 = logits[rows].topk(2, -1).values
        margins.append(float(((top2[:, 0] - top2[:, 1]) / top2[:, 0].abs()).min()))
        # a cold start: the draft KV of q - L is another token's at that position, or zeros;
        # a stale twin: the KV of q - L is right, and another slot holds another request's KV
        # written at that position (the key scores the same: its token is read half the time)
        stale = rows - lag
        shift = torch.randint(1, a.vocab - 3, (len(rows),), generator=gen)
        other = (ids[stale + 1] + shift) % a.vocab  # never the token itself
        _, ko, vo = layer.qkv(other, zero[: len(rows)], stale)
        replaced = seen & (pos[None, :] != stale[:, None])
        for name, visible, entry in (("cold_first_wrong", replaced, (ko, vo)),
                                     ("cold_zeroed_first_wrong", replaced, (ko * 0, vo * 0)),
                                     ("stale_twin_first_wrong", seen, (ko, vo))):  # fmt: skip
            out = layer.attend(q[rows], k, v, visible, [entry])
            cold, _, _ = layer.finish(out, zero[: len(rows)])
            stats[name] += int((cold != want[0]).sum())
    n = stats["positions"]
    known = float((tau == torch.arange(a.vocab)).float().mean())
    return {
        "positions": n,
        "mechanism_wrong": stats["mechanism_wrong"],
        "known_fraction": round(known, 4),
        "first_right": round(stats["first_right"] / n, 4),
        "accept_length_expected": round(sum(known**s for s in range(steps + 1)), 3),
        "accept_length_checked": round(1 + stats["accepted"] / n, 3),
        "cold_first_wrong": round(stats["cold_first_wrong"] / n, 4),
        "cold_zeroed_first_wrong": round(stats["cold_zeroed_first_wrong"] / n, 4),
        "stale_twin_first_wrong": round(stats["stale_twin_first_wrong"] / n, 4),
        "min_relative_margin": round(min(margins), 3),
    }
