#!/usr/bin/env python3
"""dq in bfloat16 when the keys share a large component (docs/kernels.md, "Keys that share a large component").

Keys k_j = c + k'_j with one c per head: softmax ignores c, but dq_i = scale sum_j dS_ij k_j holds
c sum_j dS_ij, which cancels only in exact arithmetic. This prints, for causal attention of
bfloat16-rounded inputs against float64 on the same inputs, the normalised max error of dq
(max |a - b| / max(1, max |b|), as tests/parity/parity_helpers.h) of:

  float32, rounded once      what attnlab's reference and fused backends do in half types
  FlashAttention-2 roundings float64 except D_i = dO_i . o_i from the bfloat16 o and dS rounded to
                             bfloat16 before dS K (an emulation: FlashAttention-2 keeps the rest in float32)
  torch CPU SDPA             at::scaled_dot_product_attention on CPU in bfloat16: LibTorch's CPU flash kernel

    ~/.cache/attnlab/venv/bin/python tools/shared_keys_dq.py [--seed 0]
"""
import argparse
import math

import torch


def normalised_error(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / max(1.0, b.abs().max().item())).item()


def bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16)


def attention_dq(q, k, v, do, dtype):
    """dq of causal softmax attention computed in `dtype`, and o and p."""
    q = q.detach().to(dtype).clone().requires_grad_()
    T, d = q.shape[-2], q.shape[-1]
    s = (q @ k.to(dtype).transpose(-1, -2)) / math.sqrt(d)
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    p = s.softmax(-1)
    o = p @ v.to(dtype)
    o.backward(do.to(dtype))
    return q.grad, o.detach(), p.detach()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    B, H, T, d = 2, 3, 64, 64
    print(f"B={B} H={H} T={T} d={d}, normalised max error of dq against float64")
    print(f"{'|c|':>5}  {'float32, rounded once':>22}  {'FlashAttention-2 roundings':>26}  {'torch CPU SDPA':>14}")
    for c_norm in (0.0, 64.0, 100.0):
        q, k, v, do = (bf16(torch.randn(B, H, T, d, dtype=torch.double)).double() for _ in range(4))
        c = torch.randn(1, H, 1, d, dtype=torch.double)
        k = bf16(k + c / c.norm(dim=-1, keepdim=True) * c_norm).double()
        exact, o, p = attention_dq(q, k, v, do, torch.double)
        once = bf16(attention_dq(q, k, v, do, torch.float)[0])
        D = (do * bf16(o).double()).sum(-1, keepdim=True)
        dS = p * (do @ v.transpose(-1, -2) - D)
        fa2 = (bf16(dS).double() @ k) / math.sqrt(d)
        qs = bf16(q).requires_grad_()
        torch.nn.functional.scaled_dot_product_attention(qs, bf16(k), bf16(v), is_causal=True).backward(bf16(do))
        print(f"{c_norm:5.0f}  {normalised_error(once, exact):22.2e}  {normalised_error(fa2, exact):26.2e}  "
              f"{normalised_error(qs.grad, exact):14.2e}")


if __name__ == "__main__":
    main()
