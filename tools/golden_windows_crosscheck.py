#!/usr/bin/env python3
"""Cross-check of tests/data/golden/window_arms.json by a second implementation (docs/windows.md).

torch autograd in float64, written from docs/arms.md and docs/windows.md and not from
tools/golden_arms.py: each query's visible keys are listed one by one as the set
V(i) = {j : j <= i and (i - j < W or j < n)}, the sink term is an extra column of the log-sum-exp, and
the gradients of sum(o * R) are autograd's (golden_arms.py takes central finite differences).

    venv/bin/python tools/golden_windows_crosscheck.py [tests/data/golden/window_arms.json] [--attnlab build/attnlab]

Prints the largest difference of the outputs (o, lse, phantom mass, output gate) and of the gradients
over every case; exit 1 when they exceed 1e-12 and 1e-7 (the golden README's tolerances).
"""
import argparse
import json
import subprocess
import sys

import torch

def registry_arms(binary):
    """(sink, gate, slot, output gate) of every arm of the registry (`attnlab arms --json`), None for
    a feature the arm lacks."""
    arms = json.loads(subprocess.run([binary, "arms", "--json"], check=True, capture_output=True, text=True).stdout)
    feature = lambda value: None if value == "none" else value  # noqa: E731
    return {a["name"]: (feature(a["sink"]), feature(a["gate"]), a["gate_slot"] if a["gate"] != "none" else None,
                        feature(a["out_gate"])) for a in arms}


def visible_keys(i, window, keep_first):
    return [j for j in range(i + 1) if i - j < window or j < keep_first]


def attention(features, window, keep_first, t):
    """o [H, T, d] (gated by the output gate where the arm has one), lse [H, T], phantom [H, T], gate."""
    sink, gate, slot, out_gate = features
    q, k, v = t["q"], t["k"], t["v"]
    H, T, d = q.shape
    if gate == "norm":
        z = 8.0 * (v.norm(dim=-1) / d ** 0.5 - t["tau"][:, None])
    elif gate == "projection":
        z = (v * t["w"][:, None, :]).sum(-1) + t["c"][:, None]
    reads = v * torch.sigmoid(z)[..., None] if slot == "value" else v
    bias = torch.nn.functional.logsigmoid(z) if slot == "routing" else torch.zeros(H, T, dtype=v.dtype)
    o_rows, lse_rows, ph_rows = [], [], []
    for h in range(H):
        b = t["sink_logit"][h] if sink == "learned" else torch.zeros((), dtype=v.dtype)
        o_h, lse_h, ph_h = [], [], []
        for i in range(T):
            keys = visible_keys(i, window, keep_first)
            logits = torch.stack([q[h, i] @ k[h, j] / d ** 0.5 + bias[h, j] for j in keys])
            with_sink = torch.cat([logits, b.reshape(1)]) if sink else logits
            lse = torch.logsumexp(with_sink, 0)
            a = torch.exp(logits - lse)
            o_h.append((a[:, None] * reads[h, keys]).sum(0))
            lse_h.append(lse)
            ph_h.append(torch.exp(b - lse) if sink else torch.zeros((), dtype=v.dtype))
        o_rows.append(torch.stack(o_h))
        lse_rows.append(torch.stack(lse_h))
        ph_rows.append(torch.stack(ph_h))
    o, lse, phantom = torch.stack(o_rows), torch.stack(lse_rows), torch.stack(ph_rows)
    gamma = None
    if out_gate:
        g = torch.sigmoid(t["x"] @ t["out_gate_w"] + t["out_gate_c"])  # [T, H] or [T, H d]
        gamma = g.T if out_gate == "headwise" else g.reshape(T, H, d).permute(1, 0, 2)
        o = o * (gamma[..., None] if out_gate == "headwise" else gamma)
    return o, lse, phantom, gamma


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("golden", nargs="?", default="tests/data/golden/window_arms.json")
    p.add_argument("--attnlab", default="build/attnlab", help="the binary whose arm registry names the features")
    args = p.parse_args()
    arms = registry_arms(args.attnlab)
    with open(args.golden) as f:
        golden = json.load(f)
    as_tensor = lambda x: torch.tensor(x, dtype=torch.float64)
    out_err = grad_err = 0.0
    for name, case in golden["arms"].items():
        t = {n: as_tensor(golden[n]).requires_grad_() for n in ("q", "k", "v") + (("x",) if "x" in golden else ())}
        t.update({n: as_tensor(p).requires_grad_() for n, p in case["params"].items()})
        o, lse, phantom, gamma = attention(arms[case["arm"]], case["window"], case["keep_first"], t)
        (o * as_tensor(golden["R"])).sum().backward()
        pairs = [(o, case["o"]), (lse, case["lse"]), (phantom, case["phantom_mass"])]
        if gamma is not None:
            pairs.append((gamma, case["out_gate"]))
        case_out = max(float((mine.detach() - as_tensor(want)).abs().max()) for mine, want in pairs)
        wanted = {"q", "k", "v", *case["params"]} | ({"x"} if gamma is not None else set())
        if set(case["grad"]) != wanted:
            print(f"{name}: the file's gradients {sorted(case['grad'])} are not those of {sorted(wanted)}")
            return 1
        case_grad = max(float((t[n].grad - as_tensor(g)).abs().max()) for n, g in case["grad"].items())
        out_err, grad_err = max(out_err, case_out), max(grad_err, case_grad)
        print(f"{name}: outputs {case_out:.1e}, gradients {case_grad:.1e}")
    print(f"{len(golden['arms'])} cases: outputs agree to {out_err:.1e}, gradients to {grad_err:.1e}")
    return 0 if out_err <= 1e-12 and grad_err <= 1e-7 else 1


if __name__ == "__main__":
    sys.exit(main())
