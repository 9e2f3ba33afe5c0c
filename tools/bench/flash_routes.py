#!/usr/bin/env python3
"""How the routing bias r_j (renorm) should reach LibTorch's CPU flash kernel, by measurement
(docs/kernels.md, "The flash backend"): as the kernel's additive mask [B, H, 1, T], or as an extra
score column (queries 1, keys r_j / scale, head_dim d + 1). Times, in one process and interleaved,
the forward of the plain kernel, with the mask and with the column, and the backward of the plain
kernel and on the widened operands (which the gradient of r_j needs either way: with the mask, or with
the column holding r_j / scale). Median of --repeats calls after two warm-up calls, in CPU time of
the process (time.process_time: with one thread, the work itself, whatever else loads the machine).

  tools/bench/flash_routes.py [--threads 1] [--repeats 21]
"""
import argparse
import math
import statistics
import time

import torch
import torch.nn.functional as F

fwd = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
bwd = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward


def median_ms(fn, repeats):
    fn(), fn()
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return 1e3 * statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=21)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"# CPU flash kernel, float32, {args.threads} thread(s), median of {args.repeats} calls, CPU ms\n")
    print("| B, H, T, d | fwd plain | fwd mask | fwd column | bwd plain | bwd widened + mask | bwd widened column |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for B, H, T, d in [(8, 2, 256, 64), (2, 4, 1024, 64)]:
        x = torch.randn(B, T, 3, H, d)  # the model's c_attn output, [B, T, 3, H, d]
        q, k, v = (x[:, :, i].transpose(1, 2) for i in range(3))
        r = F.logsigmoid(torch.randn(B, H, T))
        scale = 1 / math.sqrt(d)
        d_o = torch.randn(B, T, H, d).transpose(1, 2)
        o, lse = fwd(q, k, v, 0.0, True, scale=scale)
        mask = r.unsqueeze(2)

        def column(t, col):
            return torch.cat([t, col.unsqueeze(-1).expand(*t.shape[:-1], 1)], -1)

        one, zero = torch.ones(()), torch.zeros(())
        plain_f = median_ms(lambda: fwd(q, k, v, 0.0, True, scale=scale), args.repeats)
        mask_f = median_ms(lambda: fwd(q, k, v, 0.0, True, attn_mask=mask, scale=scale), args.repeats)
        col_f = median_ms(lambda: fwd(column(q, one), column(k, r / scale), column(v, zero), 0.0, True, scale=scale),
                          args.repeats)
        plain_b = median_ms(lambda: bwd(d_o, q, k, v, o, lse, 0.0, True, scale=scale), args.repeats)
        wide = lambda k_col, m: bwd(column(d_o, zero), column(q, one), column(k, k_col), column(v, zero),
                                    column(o, zero), lse, 0.0, True, attn_mask=m, scale=scale)
        mask_b = median_ms(lambda: wide(zero, mask), args.repeats)
        col_b = median_ms(lambda: wide(r / scale, None), args.repeats)
        print(f"| {B}, {H}, {T}, {d} | {plain_f:.2f} | {mask_f:.2f} | {col_f:.2f} | {plain_b:.2f} | {mask_b:.2f} | "
              f"{col_b:.2f} |")


if __name__ == "__main__":
    main()
