#!/usr/bin/env python3
"""The peer of attnlab's CPU training step: a plain eager PyTorch GPT, written the way a researcher
would write it (nanoGPT's shape), with attnlab's micro tier's dimensions, vocabulary, batch, optimizer
and clipping (configs/tiers/micro.yaml, SPEC section 2):

  2 layers, d_model 128, 2 heads of 64, vocabulary 4096, context 256; pre-LayerNorm blocks, GELU
  (tanh), tied LM head, causal attention by F.scaled_dot_product_attention; a step is 4096 tokens as
  2 micro-batches of 8 x 256, cross-entropy, global-norm clipping at 1.0, AdamW (betas 0.9 / 0.95,
  eps 1e-8, weight decay 0.1 on matrices and embeddings only) with warm-up + cosine learning rate.

Prints one JSON line: the wall and CPU seconds of each training step and the CPU seconds of its
optimizer step alone, and the process's user / system CPU time. `--adamw fused` steps AdamW with PyTorch's fused kernel instead of its default per-parameter
loop (the optimizer lever of docs/benchmarks.md).
tools/bench/cpu_step_vs_peer.sh runs it back to back with `attnlab train` (docs/benchmarks.md).
"""
import argparse
import json
import math
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(d_model)
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.attn_proj = nn.Linear(d_model, d_model)
        self.ln_2 = nn.LayerNorm(d_model)
        self.c_fc = nn.Linear(d_model, 4 * d_model)
        self.mlp_proj = nn.Linear(4 * d_model, d_model)

    def attention(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.attn_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, n_layer, d_model, n_head, vocab, block_size):
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(block_size, d_model)
        self.h = nn.ModuleList(Block(d_model, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model)
        for name, p in self.named_parameters():  # GPT-2's initialisation
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied head


def learning_rate(step, lr, warmup, total, min_ratio=0.1):
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return lr * min_ratio + 0.5 * (1 + math.cos(math.pi * progress)) * (lr - lr * min_ratio)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n-layer", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--n-head", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--tokens-per-step", type=int, default=4096)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--total-steps", type=int, default=600)
    ap.add_argument("--adamw", choices=["loop", "fused"], default="loop", help="AdamW implementation (default: PyTorch's)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)

    model = GPT(args.n_layer, args.d_model, args.n_head, args.vocab, args.seq_len)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=args.adamw == "fused" or None)
    accum = args.tokens_per_step // (args.batch * args.seq_len)
    gen = torch.Generator().manual_seed(2)
    batches = [torch.randint(0, args.vocab, (args.batch, args.seq_len + 1), generator=gen) for _ in range(2 * accum)]

    times, cpu_times, opt_times = [], [], []
    for step in range(args.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        for g in opt.param_groups:
            g["lr"] = learning_rate(step, args.lr, args.warmup, args.total_steps)
        opt.zero_grad(set_to_none=True)
        for micro in range(accum):
            b = batches[(step * accum + micro) % len(batches)]
            x, y = b[:, :-1], b[:, 1:]
            loss = F.cross_entropy(model(x).view(-1, args.vocab), y.reshape(-1)) / accum
            loss.backward()
            loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        c1 = time.process_time()
        opt.step()
        opt_times.append(time.process_time() - c1)
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"step_s": times, "step_cpu_s": cpu_times, "optimizer_cpu_s": opt_times,
                      "user_s": usage.ru_utime, "sys_s": usage.ru_stime}))


if __name__ == "__main__":
    main()
