#!/usr/bin/env python3
"""Build a Llama target whose attention decides every token, and an EAGLE-3 draft for it: a
pair on which greedy outputs are exact, whatever the batch or the kernels (issue 20's
correctness runs).

The random pair's near-ties make greedy outputs differ in the last bits between a verify and a
decode forward; this target has none, and its next token is read from another position's KV:

* **Residual stream** of width ``H`` in two halves. The token embedding ``e[x]`` (Fourier
  features, as in ``make_synth_models.py``, RMS 1 over ``H``) fills half A; half B holds only
  the constant coordinate (``H - 2``), which nothing writes.
* **Layer 0's attention copies the token ``D - 1`` positions back into half B.** ``q`` and
  ``k`` are constant (read from the constant coordinate), ``k`` rotated by ``D - 1`` positions
  against ``q`` in RoPE's (neox) pairs, so the score ``sum_i |q_i|^2 cos(theta_i (m - n - D +
  1))`` peaks at key ``n = m + 1 - D`` by a margin of ``PEAK_LOGIT`` after scaling (softmax
  weight elsewhere below e^-60 per key; ``copy_rope.py``); ``v`` copies half A, ``o_proj`` writes it into half B.
  Every other ``o_proj`` and ``down_proj`` is zero: the residual carries ``[e[x_m], e[x_{m+1-D}]]`` to the end.
* **lm_head** row ``j`` is ``[0, e[j - 1]]``: the greedy next token is ``x_{m+1-D} + 1``, that
  is ``next(seq) = seq[-D] + 1 (mod V)``, with a logit margin of about half the peak.
  A KV entry written at the wrong slot, lost across a switch or read from another request
  changes the token.
* **Draft** (one layer, ``make_synth_models.draft_weights``) with ``fc`` reading half A of the
  first aux hidden state: for ``D = 2`` its first proposal is always right and the later ones
  right only by chance, so verify accepts ~1 draft token (accept length ~2 of 4), and the
  multi-token accept path runs. It reads no KV of its own (its ``o_proj`` is 0).
* **Lag draft** (``--draft-lag L``, ``make_copy_draft.py``; ``D = L + 1``, derived): every
  proposal is read from the draft's own KV of ``L`` positions back, so a switch on that leaves
  the draft KV of the tokens decoded while off unwritten costs it ``L`` results (issue 20's
  re-entry run); steady accept length ``1 + q + q^2 + q^3`` of 4.

``--check`` runs the target's layer 0 (RoPE, causal softmax) and the read-out on the bf16
weights for random sequences and asserts every position's argmax; with ``--draft-lag``, also
the lag draft's layer (``make_copy_draft.check``: every proposal, and a cold start's). The
copy rule's ``D``, the lag and the checks go to ``models.json``. Usage::

    make_copy_model.py OUT [--offset 2 | --draft-lag 8] [--check]   # OUT/{target,draft,models.json}
"""

from __future__ import annotations

import argparse
import json
import math
import os

import make_copy_draft
import torch
from copy_rope import ROPE_THETA, lagged_qk, rope, rope_pairs, rope_theta
from make_synth_models import (
    config,
    draft_weights,
    fourier_embeddings,
    kernel_margin,
    known_permutation,
    rms_norm,
    write,
)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--inter", type=int, default=1024)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--offset", type=int, help="D: the token read is D back (default 2, L + 1)")
    p.add_argument(
        "--draft-lag",
        type=int,
        metavar="L",
        help="build the lag draft (make_copy_draft.py: it reads its own KV of L positions "
        "back; needs --offset L + 1, the default then); default: the draft that reads no KV",
    )
    p.add_argument("--known", type=float, default=0.9, help="the draft's known fraction")
    p.add_argument("--max-len", type=int, default=4096, help="positions the margin is checked to")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", action="store_true")
    a = p.parse_args()
    if a.draft_lag is None:
        a.offset = 2 if a.offset is None else a.offset
    elif a.draft_lag < 2:  # the later draft steps must read committed KV, not their own
        p.error(f"--draft-lag {a.draft_lag}: at least 2")
    elif a.offset not in (None, a.draft_lag + 1):
        p.error(
            f"--draft-lag {a.draft_lag} needs --offset {a.draft_lag + 1}, not {a.offset}: the "
            f"draft proposes x[m-L+1] + 1 where the target's next is x[m+2-D] + 1"
        )
    else:
        a.offset = a.draft_lag + 1
    return a


def target_weights(a, emb):
    h, hd, half = a.hidden, a.hidden // a.heads, a.hidden // 2
    const = h - 2
    group = a.heads // a.kv_heads
    assert a.kv_heads * hd == half, "the values copy half A: kv_heads * head_dim == hidden / 2"
    q = torch.zeros(a.heads * hd, h)
    k = torch.zeros(a.kv_heads * hd, h)
    v = torch.zeros(a.kv_heads * hd, h)
    o = torch.zeros(h, a.heads * hd)
    q_row, k_row = lagged_qk(hd, a.offset - 1, a.max_len)  # query m reads key m + 1 - D
    for head in range(a.heads):
        q[head * hd : (head + 1) * hd, const] = q_row
    for g in range(a.kv_heads):
        k[g * hd : (g + 1) * hd, const] = k_row
        v[g * hd : (g + 1) * hd, g * hd : (g + 1) * hd] = torch.eye(hd)
        head = g * group  # the first query head of each kv group writes its slice of half B
        o[half + g * hd : half + (g + 1) * hd, head * hd : (head + 1) * hd] = torch.eye(hd)
    gen = torch.Generator().manual_seed(a.seed + 1)

    def rnd(*shape):  # full-cost matmuls with harmless values
        return torch.randn(*shape, generator=gen) * 0.02

    lm_head = torch.zeros(a.vocab, h)
    lm_head[:, half:] = torch.roll(emb, 1, dims=0)[:, :half]  # row j reads e[j - 1] from B
    w = {
        "model.embed_tokens.weight": emb,
        "model.norm.weight": torch.ones(h),
        "lm_head.weight": lm_head,
    }
    for n in range(a.layers):
        p = f"model.layers.{n}."
        first = n == 0
        w.update(
            {
                p + "self_attn.q_proj.weight": q if first else rnd(a.heads * hd, h),
                p + "self_attn.k_proj.weight": k if first else rnd(a.kv_heads * hd, h),
                p + "self_attn.v_proj.weight": v if first else rnd(a.kv_heads * hd, h),
                p + "self_attn.o_proj.weight": o if first else torch.zeros(h, a.heads * hd),
                p + "mlp.gate_proj.weight": rnd(a.inter, h),
                p + "mlp.up_proj.weight": rnd(a.inter, h),
                p + "mlp.down_proj.weight": torch.zeros(h, a.inter),
                p + "input_layernorm.weight": torch.ones(h),
                p + "post_attention_layernorm.weight": torch.ones(h),
            }
        )
    return w


def check(a, tw, sequences=8, length=512):
    """Layer 0 and the read-out, in bf16 as SGLang runs them, on random sequences: every
    position ``m >= D`` must predict ``x[m + 1 - D] + 1``."""
    bf = {key: value.to(torch.bfloat16) for key, value in tw.items()}
    hd = a.hidden // a.heads
    theta = rope_theta(hd)
    gen = torch.Generator().manual_seed(a.seed + 2)
    wrong, total, margins = 0, 0, []
    for _ in range(sequences):
        ids = torch.randint(3, a.vocab, (length,), generator=gen)
        x = bf["model.embed_tokens.weight"][ids]
        n = rms_norm(x, bf["model.layers.0.input_layernorm.weight"])
        q = (n @ bf["model.layers.0.self_attn.q_proj.weight"].T).view(length, a.heads, hd)
        k = (n @ bf["model.layers.0.self_attn.k_proj.weight"].T).view(length, a.kv_heads, hd)
        v = (n @ bf["model.layers.0.self_attn.v_proj.weight"].T).view(length, a.kv_heads, hd)
        pos = torch.arange(length)
        q, k = rope(q, pos, theta).to(torch.bfloat16), rope(k, pos, theta).to(torch.bfloat16)
        k = k.repeat_interleave(a.heads // a.kv_heads, 1)
        v = v.repeat_interleave(a.heads // a.kv_heads, 1)
        s = torch.einsum("mhd,nhd->hmn", q.float(), k.float()) / math.sqrt(hd)
        s = s.masked_fill(torch.triu(torch.ones(length, length, dtype=torch.bool), 1), -math.inf)
        att = torch.softmax(s, -1).to(torch.bfloat16)
        out = torch.einsum("hmn,nhd->mhd", att.float(), v.float()).to(torch.bfloat16)
        h = x + out.reshape(length, -1) @ bf["model.layers.0.self_attn.o_proj.weight"].T
        logits = rms_norm(h, bf["model.norm.weight"]).float() @ bf["lm_head.weight"].float().T
        top2 = logits.topk(2, -1).values
        m = torch.arange(a.offset - 1, length)
        want = (ids[m + 1 - a.offset] + 1) % a.vocab
        wrong += int((logits[m].argmax(-1) != want).sum())
        total += len(m)
        margins.append(float((top2[m, 0] - top2[m, 1]).min() / top2[m, 0].abs().max()))
    return {"positions": total, "wrong": wrong, "min_relative_margin": round(min(margins), 3)}


def main():
    a = parse_args()
    half = a.hidden // 2
    gen = torch.Generator().manual_seed(a.seed)
    # the Fourier pairs fill half A; the constant coordinate (hidden - 2) lies in half B
    emb, rot, freqs = fourier_embeddings(a.vocab, a.hidden, gen, "cpu", pairs=(half - 2) // 2)
    cross = kernel_margin(freqs, a.vocab, a.hidden)
    assert cross < 0.6, f"embeddings not separable enough: cross/self = {cross:.3f}"
    _, _, _, rel_gap = rope_pairs(a.hidden // a.heads, a.offset - 1, a.max_len)
    tw = target_weights(a, emb)
    aux_ids = [1, a.layers // 2 - 1, a.layers - 4]
    assert len(set(aux_ids)) == 3 and min(aux_ids) >= 0, aux_ids
    extra = {"rope_theta": ROPE_THETA, "max_position_embeddings": a.max_len}
    write(
        os.path.join(a.out, "target"),
        {**config(a, architectures=["LlamaForCausalLM"], num_hidden_layers=a.layers), **extra},
        tw,
    )
    tau = known_permutation(a.vocab, a.known, gen)
    if a.draft_lag is None:
        dw, shape = draft_weights(a, emb, rot, tau, gen, "cpu"), {}
        read_a = torch.zeros(a.hidden, a.hidden)
        read_a[:half, :half] = torch.eye(half)
        read_a[a.hidden - 2, a.hidden - 2] = 1.0  # half A with the constant coordinate
        dw["fc.weight"] = torch.cat([read_a, torch.zeros(a.hidden, 2 * a.hidden)], dim=1)
    else:
        dw, shape = make_copy_draft.weights(a, emb, tau), make_copy_draft.config_overrides(a)
    dcfg = config(
        a,
        architectures=["LlamaForCausalLMEagle3"],
        num_hidden_layers=1,
        draft_vocab_size=a.vocab,
        eagle_config={"eagle_aux_hidden_state_layer_ids": aux_ids, "use_aux_hidden_state": True},
        **shape,
    )
    write(os.path.join(a.out, "draft"), {**dcfg, **extra}, dw)
    info = {
        "rule": f"next = seq[-{a.offset}] + 1 (mod {a.vocab})",
        "offset": a.offset,
        "vocab": a.vocab,
        "hidden": a.hidden,
        "layers": a.layers,
        "aux_layer_ids": aux_ids,
        "embedding_cross_over_self": round(cross, 4),
        "rope_score_relative_gap": round(rel_gap, 4),
        "draft_known_fraction": a.known,
        "draft_lag": a.draft_lag,  # None: the draft that reads no KV
    }
    if a.check:
        info["check"] = check(a, tw)
        assert info["check"]["wrong"] == 0, info["check"]
    if a.check and a.draft_lag is not None:
        info["draft_check"] = make_copy_draft.check(a, emb, dw, tau)
        assert info["draft_check"]["mechanism_wrong"] == 0, info["draft_check"]
        assert info["draft_check"]["cold_first_wrong"] >= 0.9, info["draft_check"]
    with open(os.path.join(a.out, "models.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
