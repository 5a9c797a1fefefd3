#!/usr/bin/env python3
"""Attention kernels of a one-token verify, on the GPU: results and time (device side).

Upstream's zero-step state (``--speculative-adaptive``; the hook's "off" before its plain off
state) is a TARGET_VERIFY forward of one token per request. With the triton backend that forward
runs the extend kernel (``extend_attention_fwd``); a server without speculation runs the decode
kernel (``decode_attention_fwd``) for the same attention; upstream also ships a split-KV verify
kernel (``verify_splitkv_fwd``, enabled by SGLang only on AMD gfx95). This script checks, on
Llama-3-8B attention shapes (32 query heads, 8 KV heads, head size 128, bf16, KV slots
scattered through the pool), that the three give the attention a float32 reference gives, and
times them. One JSON line per (kernel, batch size, context length) on stdout.

Usage (device, SGLang on PYTHONPATH): splitkv_check.py [--bs 1,8,64,128] [--ctx 256,2048]
"""

from __future__ import annotations

import argparse
import json

import torch
from sglang.kernels.ops.attention.decode_attention import decode_attention_fwd
from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd
from sglang.kernels.ops.attention.verify_splitkv import verify_splitkv_fwd

H_Q, H_KV, DIM = 32, 8, 128
MAX_KV_SPLITS = 8  # --triton-attention-num-kv-splits default


def problem(bs: int, ctx: int, draft: int, seed: int = 0) -> dict:
    """A verify problem: ``ctx`` cached tokens then ``draft`` new ones per request."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    total = bs * (ctx + draft)
    slots = torch.randperm(total + 1024, device="cuda", generator=g)[:total]  # scattered
    k_buf = torch.randn(total + 1024, H_KV, DIM, device="cuda", generator=g).bfloat16()
    v_buf = torch.randn(total + 1024, H_KV, DIM, device="cuda", generator=g).bfloat16()
    q = torch.randn(bs * draft, H_Q, DIM, device="cuda", generator=g).bfloat16()
    per_req = slots.view(bs, ctx + draft)
    new = per_req[:, ctx:].reshape(-1)
    return {
        "bs": bs, "ctx": ctx, "draft": draft, "q": q, "k_buf": k_buf, "v_buf": v_buf,
        "prefix": per_req[:, :ctx].reshape(-1).long(), "whole": per_req.reshape(-1).long(),
        "k_new": k_buf[new].contiguous(), "v_new": v_buf[new].contiguous(),
    }  # fmt: skip


def reference(p: dict) -> torch.Tensor:
    """float32 causal attention of each request's new tokens over its whole sequence."""
    bs, ctx, draft = p["bs"], p["ctx"], p["draft"]
    k = p["k_buf"][p["whole"]].float().view(bs, ctx + draft, H_KV, DIM)
    v = p["v_buf"][p["whole"]].float().view(bs, ctx + draft, H_KV, DIM)
    k = k.repeat_interleave(H_Q // H_KV, dim=2).transpose(1, 2)
    v = v.repeat_interleave(H_Q // H_KV, dim=2).transpose(1, 2)
    q = p["q"].float().view(bs, draft, H_Q, DIM).transpose(1, 2)
    mask = torch.ones(draft, ctx + draft, dtype=torch.bool, device="cuda").tril(ctx)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return out.transpose(1, 2).reshape(bs * draft, H_Q, DIM)


def verify_args(p: dict, o: torch.Tensor) -> tuple:
    """The positional arguments extend_attention_fwd and verify_splitkv_fwd share."""
    bs, ctx, draft = p["bs"], p["ctx"], p["draft"]
    qo = torch.arange(0, (bs + 1) * draft, draft, dtype=torch.int32, device="cuda")
    kv = torch.arange(0, (bs + 1) * ctx, ctx, dtype=torch.int32, device="cuda")
    # the verify's tree mask of a topk-1 chain: the whole prefix, then causal among the drafts
    row = torch.ones(draft, ctx + draft, dtype=torch.bool, device="cuda").tril(ctx)
    mask = row.reshape(-1).repeat(bs)
    mask_indptr = torch.arange(
        0, (bs + 1) * draft * (ctx + draft), draft * (ctx + draft), dtype=torch.int64, device="cuda"
    )
    return (p["q"], p["k_new"], p["v_new"], o, p["k_buf"], p["v_buf"], qo, kv, p["prefix"],
            mask, True, mask_indptr, draft, 1.0, 1.0)  # fmt: skip


def run_extend(p: dict) -> torch.Tensor:
    o = torch.empty_like(p["q"])
    extend_attention_fwd(*verify_args(p, o), DIM**-0.5)
    return o


def run_splitkv(p: dict) -> torch.Tensor:
    o = torch.empty_like(p["q"])
    if not verify_splitkv_fwd(*verify_args(p, o), DIM**-0.5, max_bs=p["bs"]):
        raise SystemExit("verify_splitkv_fwd refused the problem")
    return o


def run_decode(p: dict) -> torch.Tensor:
    """What a plain decode does: the new token's KV is in the pool, attend to all of it."""
    bs, ctx = p["bs"], p["ctx"]
    o = torch.empty_like(p["q"])
    kv = torch.arange(0, (bs + 1) * (ctx + 1), ctx + 1, dtype=torch.int32, device="cuda")
    logits = torch.empty(bs, H_Q, MAX_KV_SPLITS, DIM, dtype=torch.float32, device="cuda")
    lse = torch.empty(bs, H_Q, MAX_KV_SPLITS, dtype=torch.float32, device="cuda")
    splits = torch.full((bs,), MAX_KV_SPLITS, dtype=torch.int32, device="cuda")
    decode_attention_fwd(p["q"], p["k_buf"], p["v_buf"], o, kv, p["whole"], logits, lse, splits,
                         MAX_KV_SPLITS, DIM**-0.5, 1.0, 1.0)  # fmt: skip
    return o


def time_us(fn, p: dict, repeats: int = 50) -> float:
    for _ in range(3):
        fn(p)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(repeats):
        fn(p)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000.0 / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bs", default="1,8,64,128")
    parser.add_argument("--ctx", default="256,2048")
    args = parser.parse_args()
    kernels = [("extend", run_extend, (1, 4)), ("splitkv", run_splitkv, (1, 4)),
               ("decode", run_decode, (1,))]  # fmt: skip
    for ctx in map(int, args.ctx.split(",")):
        for bs in map(int, args.bs.split(",")):
            for draft in (1, 4):
                p = problem(bs, ctx, draft)
                want = reference(p)
                for name, fn, drafts in kernels:
                    if draft not in drafts:
                        continue
                    err = (fn(p).float() - want).abs().max().item()
                    row = {"kernel": name, "bs": bs, "ctx": ctx, "draft_tokens": draft,
                           "max_abs_err": round(err, 5), "us": round(time_us(fn, p), 1)}  # fmt: skip
                    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
