#!/usr/bin/env python3
"""Build a Llama target whose greedy next token is ``token + 1`` and EAGLE-3 drafts that agree
with it for a chosen fraction of tokens: a speculative-decoding pair whose acceptance is a knob.

Random weights accept nothing, so speculation can only lose. Here:

* **Target** (``LlamaForCausalLM``, Llama-3-8B shape by default, bf16). Every layer's ``o_proj``
  and ``down_proj`` are zero, so the residual stream carries the token embedding ``e[x]``
  unchanged while every matmul (q/k/v, gate/up, the zeroed ones too) runs at full cost.
  ``lm_head[j] = e[j - 1]``, so the greedy next token of ``x`` is ``x + 1 (mod V)``, whatever
  the context.
* **Embeddings** are Fourier features: pairs ``(cos, sin)(2 pi k_j t / V)`` plus one constant
  coordinate, scaled to RMS 1. Then "next token" is linear: a block rotation ``R`` with
  ``R e[t] = e[t + 1]``, and ``e[t] . e[s]`` peaks sharply at ``t == s`` (checked below).
* **Draft** (``LlamaForCausalLMEagle3``, one layer). SGLang's draft step at a position gets the
  target's aux hidden states of the previous position (``e[y]``, token ``y``) and the token
  ``x = y + 1``; it must propose ``x + 1``. ``fc = [R, 0, 0]`` turns ``e[y]`` into ``e[y + 1]``;
  the layer's ``o_proj`` is zero and its MLP computes ``(R - I) h`` (the gate reads the
  constant coordinate, so ``silu(gate)`` is a constant and the MLP is linear), so the layer
  outputs ``R h``: one token further at every draft step, and the hidden chain stays right
  even after a wrong proposal. The draft's own ``lm_head`` reads ``h`` out through a
  permutation ``tau`` that is the identity on a chosen fraction ``q`` of the vocabulary and a
  cycle on the rest, so a proposal is right exactly when the token it should propose is in the
  "known" set. With ``num_steps`` draft steps the expected accept length (bonus included) is
  ``1 + q + q^2 + ... + q^num_steps``.
* **Tokenizer**: a word-level one with exactly ``V`` tokens (``<unk> <s> </s> w3 .. w{V-1}``).

``--check`` runs the same arithmetic as SGLang's Llama / Llama-EAGLE-3 forward (RMSNorm, fused
add-norm, SiLU-and-mul, bf16 weights; attention is skipped because ``o_proj`` is zero) on the
written weights and prints, per draft, the target's next-token accuracy and the accept length
it predicts over random token chains. Usage::

    make_synth_models.py OUT [--accept high=0.9 --accept low=0.17] [--check] [--device cuda]
    # OUT/target, OUT/draft-high, OUT/draft-low, OUT/models.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

import torch
from safetensors.torch import save_file

NUM_STEPS = 3  # draft steps the drafts are checked for (the servers' --speculative-num-steps)
GATE = 16.0  # silu(16) = 16 * sigmoid(16), within 2e-7 of 16: the MLP is linear


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--inter", type=int, default=14336)
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument(
        "--accept",
        action="append",
        default=[],
        metavar="NAME=Q",
        help="a draft named NAME that knows a fraction Q of the tokens (repeatable; "
        "default high=0.9 low=0.17: accept lengths ~3.44 and ~1.2 of 4)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--check", action="store_true", help="verify the written weights (see above)")
    return p.parse_args()


def fourier_embeddings(vocab, hidden, gen, device, pairs=None):
    """``(E, R, K)``: embeddings (float32, RMS 1), the next-token rotation, the frequencies.

    ``pairs`` frequency pairs fill the first coordinates (default: all but two), the constant
    coordinate is ``hidden - 2``, the rest stays zero."""
    pairs = (hidden - 2) // 2 if pairs is None else pairs
    freqs = torch.randperm(vocab - 1, generator=gen)[:pairs] + 1  # distinct, in 1..V-1
    amp = math.sqrt((hidden - 1) / pairs)  # pairs * amp^2 + 1 (constant coordinate) = hidden
    t = torch.arange(vocab, dtype=torch.float64)
    angle = 2 * math.pi * torch.outer(t, freqs.double()) / vocab
    emb = torch.zeros(vocab, hidden, dtype=torch.float64)
    emb[:, 0 : 2 * pairs : 2] = amp * torch.cos(angle)
    emb[:, 1 : 2 * pairs : 2] = amp * torch.sin(angle)
    emb[:, hidden - 2] = 1.0  # the constant coordinate the draft's MLP gate reads
    theta = 2 * math.pi * freqs.double() / vocab
    rot = torch.eye(hidden, dtype=torch.float64)
    idx = torch.arange(pairs) * 2
    rot[idx, idx], rot[idx, idx + 1] = torch.cos(theta), -torch.sin(theta)
    rot[idx + 1, idx], rot[idx + 1, idx + 1] = torch.sin(theta), torch.cos(theta)
    return emb.float().to(device), rot.float().to(device), freqs


def kernel_margin(freqs, vocab, hidden):
    """``max_{d != 0} e[t] . e[t + d]`` over ``e[t] . e[t]``: must stay far below 1."""
    pairs = len(freqs)
    amp2 = (hidden - 1) / pairs
    d = torch.arange(1, vocab, dtype=torch.float64)
    best = -math.inf
    for chunk in torch.split(d, 4096):
        k = amp2 * torch.cos(2 * math.pi * torch.outer(chunk, freqs.double()) / vocab).sum(1) + 1
        best = max(best, float(k.max()))
    return best / hidden


def tokenizer_files(out, vocab):
    words = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(3, vocab)]
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": w,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i, w in enumerate(words[:3])
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None,
        "decoder": None,
        "model": {
            "type": "WordLevel",
            "vocab": {w: i for i, w in enumerate(words)},
            "unk_token": "<unk>",
        },
    }
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(tok, f)
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "model_max_length": 8192,
                "clean_up_tokenization_spaces": False,
            },
            f,
        )
    with open(os.path.join(out, "special_tokens_map.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, f)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2, "do_sample": False}, f)


def config(a, **extra):
    return {
        "hidden_act": "silu",
        "hidden_size": a.hidden,
        "intermediate_size": a.inter,
        "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads,
        "head_dim": a.hidden // a.heads,
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "vocab_size": a.vocab,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "model_type": "llama",
        "attention_bias": False,
        "mlp_bias": False,
        **extra,
    }


def write(out, cfg, weights):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    cpu = {
        k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous().cpu()
        for k, v in weights.items()
    }  # d2t (int64) and t2d (bool) keep their types
    save_file(cpu, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    tokenizer_files(out, cfg["vocab_size"])


def target_weights(a, emb, gen, device):
    h, i, hd = a.hidden, a.inter, a.hidden // a.heads

    def rnd(*shape):  # full-cost matmuls with harmless values
        return torch.randn(*shape, device=device, generator=gen, dtype=torch.bfloat16) * 0.02

    def zeros(*shape):
        return torch.zeros(*shape, device=device, dtype=torch.bfloat16)

    w = {
        "model.embed_tokens.weight": emb,
        "model.norm.weight": torch.ones(h, device=device),
        "lm_head.weight": torch.roll(emb, 1, dims=0),
    }  # row j = e[j - 1]
    for n in range(a.layers):
        p = f"model.layers.{n}."
        w.update(
            {
                p + "self_attn.q_proj.weight": rnd(a.heads * hd, h),
                p + "self_attn.k_proj.weight": rnd(a.kv_heads * hd, h),
                p + "self_attn.v_proj.weight": rnd(a.kv_heads * hd, h),
                p + "self_attn.o_proj.weight": zeros(h, a.heads * hd),
                p + "mlp.gate_proj.weight": rnd(i, h),
                p + "mlp.up_proj.weight": rnd(i, h),
                p + "mlp.down_proj.weight": zeros(h, i),
                p + "input_layernorm.weight": torch.ones(h, device=device),
                p + "post_attention_layernorm.weight": torch.ones(h, device=device),
            }
        )
    return w


def known_permutation(vocab, q, gen):
    """``tau``: identity on a random fraction ``q`` of ids, one cycle over the others."""
    order = torch.randperm(vocab, generator=gen)
    unknown = order[: round((1 - q) * vocab)]
    tau = torch.arange(vocab)
    if len(unknown) > 1:
        tau[unknown] = torch.roll(unknown, -1)
    return tau


def draft_weights(a, emb, rot, tau, gen, device):
    h, i, hd = a.hidden, a.inter, a.hidden // a.heads

    def rnd(*shape):
        return torch.randn(*shape, device=device, generator=gen) * 0.02

    gate, up, down = (
        torch.zeros(i, h, device=device),
        torch.zeros(i, h, device=device),
        torch.zeros(h, i, device=device),
    )
    gate[:h, h - 2] = GATE
    up[:h] = rot - torch.eye(h, device=device)
    down[:, :h] = torch.eye(h, device=device) / (GATE * torch.sigmoid(torch.tensor(GATE)))
    m = "midlayer."
    return {
        "fc.weight": torch.cat([rot, torch.zeros(h, 2 * h, device=device)], dim=1),
        "norm.weight": torch.ones(h, device=device),
        "lm_head.weight": emb[tau.to(device)],  # row j = e[tau(j)]
        "d2t": torch.zeros(a.vocab, dtype=torch.int64),
        "t2d": torch.ones(a.vocab, dtype=torch.bool),
        m + "self_attn.q_proj.weight": rnd(a.heads * hd, 2 * h),
        m + "self_attn.k_proj.weight": rnd(a.kv_heads * hd, 2 * h),
        m + "self_attn.v_proj.weight": rnd(a.kv_heads * hd, 2 * h),
        m + "self_attn.o_proj.weight": torch.zeros(h, a.heads * hd, device=device),
        m + "mlp.gate_proj.weight": gate,
        m + "mlp.up_proj.weight": up,
        m + "mlp.down_proj.weight": down,
        m + "input_layernorm.weight": torch.ones(h, device=device),
        m + "hidden_norm.weight": torch.ones(h, device=device),
        m + "post_attention_layernorm.weight": torch.ones(h, device=device),
    }


def rms_norm(x, w, eps=1e-5):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def check(a, tw, drafts, gen, device, samples=4096):
    """SGLang's forward arithmetic on the bf16 weights (attention skipped: ``o_proj`` is 0)."""
    bf = {k: v.to(torch.bfloat16) for k, v in tw.items()}
    ids = torch.randint(0, a.vocab, (samples,), generator=gen, device=device)
    emb = bf["model.embed_tokens.weight"]
    x = emb[ids]  # residual stream == embedding through every layer
    logits = rms_norm(x, bf["model.norm.weight"]) @ bf["lm_head.weight"].T
    target_ok = float((logits.argmax(-1) == (ids + 1) % a.vocab).float().mean())
    report = {"target_next_is_plus_one": target_ok}
    for name, (dw, q) in drafts.items():
        d = {k: v.to(torch.bfloat16) for k, v in dw.items() if v.is_floating_point()}
        aux = torch.cat([x, x, x], dim=-1)  # target aux hidden states at token y = ids
        hid = aux @ d["fc.weight"].T
        accepted = torch.zeros(samples, device=device)
        alive = torch.ones(samples, dtype=torch.bool, device=device)
        for step in range(1, NUM_STEPS + 1):
            normed = rms_norm(hid, d["midlayer.post_attention_layernorm.weight"])
            gate = normed @ d["midlayer.mlp.gate_proj.weight"].T
            up = normed @ d["midlayer.mlp.up_proj.weight"].T
            mlp = (torch.nn.functional.silu(gate.float()) * up.float()).to(torch.bfloat16)
            hid = (hid.float() + (mlp @ d["midlayer.mlp.down_proj.weight"].T).float()).to(
                torch.bfloat16
            )  # fused add: residual + MLP output
            proposal = (rms_norm(hid, d["norm.weight"]) @ d["lm_head.weight"].T).argmax(-1)
            alive &= proposal == (ids + 1 + step) % a.vocab
            accepted += alive.float()
        expected = sum(q**k for k in range(NUM_STEPS + 1))
        report[name] = {
            "known_fraction": q,
            "accept_length_expected": round(expected, 3),
            "accept_length_checked": round(1 + float(accepted.mean()), 3),
        }
    return report


def main():
    a = parse_args()
    accept = dict(item.split("=", 1) for item in (a.accept or ["high=0.9", "low=0.17"]))
    t0 = time.time()
    gen_cpu = torch.Generator().manual_seed(a.seed)
    gen_dev = torch.Generator(device=a.device).manual_seed(a.seed)
    emb, rot, freqs = fourier_embeddings(a.vocab, a.hidden, gen_cpu, a.device)
    margin = kernel_margin(freqs, a.vocab, a.hidden)
    assert margin < 0.5, f"embeddings not separable enough: cross/self = {margin:.3f}"
    tw = target_weights(a, emb, gen_dev, a.device)
    aux_ids = [1, a.layers // 2 - 1, a.layers - 4]
    write(
        os.path.join(a.out, "target"),
        config(a, architectures=["LlamaForCausalLM"], num_hidden_layers=a.layers),
        tw,
    )
    drafts = {}
    for name, q in accept.items():
        tau = known_permutation(a.vocab, float(q), gen_cpu)
        dw = draft_weights(a, emb, rot, tau, gen_dev, a.device)
        dcfg = config(
            a,
            architectures=["LlamaForCausalLMEagle3"],
            num_hidden_layers=1,
            draft_vocab_size=a.vocab,
            eagle_config={
                "eagle_aux_hidden_state_layer_ids": aux_ids,
                "use_aux_hidden_state": True,
            },
        )
        write(os.path.join(a.out, f"draft-{name}"), dcfg, dw)
        drafts[name] = (dw, float(q))
    params = sum(v.numel() for k, v in tw.items())
    info = {
        "target_params_b": round(params / 1e9, 3),
        "layers": a.layers,
        "hidden": a.hidden,
        "inter": a.inter,
        "vocab": a.vocab,
        "aux_layer_ids": aux_ids,
        "embedding_cross_over_self": round(margin, 4),
        "build_s": round(time.time() - t0, 1),
    }
    if a.check:
        info["check"] = check(a, tw, drafts, gen_dev, a.device)
    with open(os.path.join(a.out, "models.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
