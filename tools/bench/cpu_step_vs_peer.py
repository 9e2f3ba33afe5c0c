#!/usr/bin/env python3
"""attnlab's CPU training step against a plain eager PyTorch GPT (tools/bench/gpt_peer.py), run back to
back on the same machine, interleaved round by round so that machine drift hits both alike.

Both train the micro tier (configs/tiers/micro.yaml: 2 layers, d_model 128, 2 heads of 64, vocabulary
4096, 4096 tokens per step as 2 micro-batches of 8 x 256, AdamW, clipping at 1.0) single-threaded on
random tokens. attnlab runs its real trainer (`attnlab train` on llm.c shards written here).

Two measures per side:
  - CPU seconds per step (user and system), by differencing: each round runs each side for --short
    and --long steps and divides the difference of the process's CPU time by the difference of the
    step counts, so start-up, warm-up, the final evaluation and checkpoint cancel. On a shared,
    loaded machine this is the figure to quote: it does not count the time the process waits for a
    core.
  - wall milliseconds per step, median over the steps of the long runs after --skip warm-up steps
    (attnlab: tokens / tokens_per_s of metrics.jsonl; the peer: its own timer).

  tools/bench/cpu_step_vs_peer.py [--rounds 3] [--short 4] [--long 12] [--attnlab build/attnlab]
                                  [--set KEY=VALUE ...]   # attnlab overrides, e.g. attention.backend=fused
                                  [--env NAME=VALUE ...]  # environment of both sides, e.g. MALLOC_...

Prints a Markdown table and the speed-up of attnlab over the peer in both measures.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
VOCAB = 4096


def write_shard(path, tokens):
    header = np.zeros(256, dtype=np.int32)
    header[:3] = (20240520, 1, len(tokens))
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype(np.uint16).tobytes())


def make_data(root):
    rng = np.random.default_rng(1)
    write_shard(root / "bench_train_000001.bin", rng.integers(0, VOCAB, 2_000_000))
    write_shard(root / "bench_val_000000.bin", rng.integers(0, VOCAB, 40_000))
    (root / "tokenizer.json").write_text(json.dumps({"tokenizer": "bytes", "vocab_size": VOCAB, "source": "random tokens (benchmark)"}))
    (root / "run.yaml").write_text(
        f"include:\n  - {REPO / 'configs/tiers/micro.yaml'}\nseed: 1\n"
        f"data: {{train: '{root}/bench_train_*.bin', val: '{root}/bench_val_*.bin', val_tokens: 8192}}\n"
        "eval: {every: 1000000}\ncheckpoint: {every: 1000000, keep_last: 1}\n")


def timed(cmd, env):
    """Runs cmd; returns (stdout, user s, sys s) of the child."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return out, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


def run_attnlab(args, root, tag, steps, env):
    out_dir = root / f"attnlab_{tag}"
    cmd = [args.attnlab, "train", "--config", str(root / "run.yaml"), "--set", f"out_dir={out_dir}",
           "--set", "train.threads=1", "--set", f"train.max_steps={steps}"]
    for s in args.set:
        cmd += ["--set", s]
    _, user, sys_s = timed(cmd, env)
    wall = [4096 / j["tokens_per_s"] for j in map(json.loads, (out_dir / "metrics.jsonl").read_text().splitlines())
            if "train_loss" in j]
    return wall[args.skip:], user, sys_s


def run_peer(args, root, tag, steps, env):
    out, user, sys_s = timed([sys.executable, str(REPO / "tools/bench/gpt_peer.py"), "--steps", str(steps)], env)
    return json.loads(out)["step_s"][args.skip:], user, sys_s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--short", type=int, default=4)
    ap.add_argument("--long", type=int, default=12)
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("--attnlab", default=str(REPO / "build/attnlab"))
    ap.add_argument("--set", action="append", default=[], help="attnlab override KEY=VALUE")
    ap.add_argument("--env", action="append", default=[], help="environment NAME=VALUE of both sides")
    args = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1", **dict(e.split("=", 1) for e in args.env))
    runners = {"attnlab": run_attnlab, "peer": run_peer}
    wall = {side: [] for side in runners}
    cpu = {side: [] for side in runners}  # per round: (user, sys) seconds per step
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_data(root)
        for r in range(args.rounds):
            for side, run in runners.items():
                _, u1, s1 = run(args, root, f"{r}s", args.short, env)
                steps, u2, s2 = run(args, root, f"{r}l", args.long, env)
                n = args.long - args.short
                wall[side] += steps
                cpu[side].append(((u2 - u1) / n, (s2 - s1) / n))
                print(f"round {r + 1} {side}: {1e3 * (u2 - u1 + s2 - s1) / n:.0f} CPU ms/step, "
                      f"median wall {1e3 * statistics.median(steps):.0f} ms/step", file=sys.stderr)
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"# micro tier, 1 thread, {args.rounds} rounds of {args.short}- and {args.long}-step runs per side, "
          f"load average {' '.join(load)}; attnlab overrides: {' '.join(args.set) or 'none'}; "
          f"environment: {' '.join(args.env) or 'default'}\n")
    print("| side | CPU ms / step | user ms | sys ms | sys share | wall ms / step (median) |")
    print("|---|---:|---:|---:|---:|---:|")
    total, med = {}, {}
    for side in runners:
        user = statistics.median(u for u, _ in cpu[side])
        sys_s = statistics.median(s for _, s in cpu[side])
        total[side] = statistics.median(u + s for u, s in cpu[side])
        med[side] = statistics.median(wall[side])
        print(f"| {side} | {1e3 * total[side]:.0f} | {1e3 * user:.0f} | {1e3 * sys_s:.0f} | "
              f"{sys_s / (user + sys_s):.0%} | {1e3 * med[side]:.0f} |")
    print(f"\nattnlab over the peer: {total['peer'] / total['attnlab']:.2f}x in CPU time per step, "
          f"{med['peer'] / med['attnlab']:.2f}x in wall time per step")


if __name__ == "__main__":
    main()
