#!/usr/bin/env python3
"""Whole-model training-step benchmark through the real trainer: `attnlab train` of a tier for a few
steps per arm and attention backend on random tokens (llm.c shards written here), reading each step's
tokens/s and MFU from metrics.jsonl. Evaluation and the final checkpoint happen outside the timed
steps. The first `--skip` steps are warm-up (allocator, cuDNN/cuBLAS heuristics) and dropped.

  tools/bench/step_bench.py --tier 124m --backends flash,sdpa --steps 8     # one GPU (bf16 autocast)
  tools/bench/step_bench.py --tier micro --device cpu --threads 1            # CPU

Prints a Markdown table: per (arm, backend) the median step ms, tokens/s, MFU (CUDA; the trainer's
6N + 12 L d T FLOPs per token over the device's dense bf16 peak) and the step time over baseline's on
the same backend. Runs that fail (a backend that cannot serve an arm) are listed, not fatal.
Standard library only: the GPU machine's python needs nothing beyond itself.
"""
import argparse
import array
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def write_shard(path, n, vocab):
    """llm.c shard: 256 int32 header (magic, version, count), then n random uint16 tokens below vocab."""
    header = array.array("i", [0] * 256)
    header[0], header[1], header[2] = 20240520, 1, n
    raw = array.array("H", os.urandom(2 * n))
    tokens = array.array("H", (t % vocab for t in raw))
    with open(path, "wb") as f:
        header.tofile(f)
        tokens.tofile(f)


def attnlab_output(attnlab, *args):
    """stdout of `attnlab ARGS...`; exits naming the command when it fails."""
    done = subprocess.run([attnlab, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{attnlab} {' '.join(args)}: {(done.stderr or done.stdout).strip()}")
    return done.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tier", default="124m")
    ap.add_argument("--arms", default="", help="comma-separated arms (default: every arm of `attnlab arms --names`)")
    ap.add_argument("--backends", default="flash", help="comma-separated attention backends")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--threads", type=int, default=0, help="train.threads (0: LibTorch's default)")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--skip", type=int, default=3)
    ap.add_argument("--batch", type=int, default=0, help="train.batch_size (0: the tier's)")
    ap.add_argument("--tokens-per-step", type=int, default=0, help="train.tokens_per_step (0: one micro-batch)")
    ap.add_argument("--attnlab", default=str(REPO / "build/attnlab"))
    ap.add_argument("--set", action="append", default=[], help="extra attnlab override KEY=VALUE")
    ap.add_argument("--keep", help="keep the run directories here (default: a temporary directory)")
    args = ap.parse_args()

    arms = args.arms.split(",") if args.arms else attnlab_output(args.attnlab, "arms", "--names").split()
    rows, failures = [], []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep or tmp)
        root.mkdir(parents=True, exist_ok=True)
        # The tier's sizes, as attnlab resolves them (val_tokens is set once the sequence length is known).
        tier = json.loads(attnlab_output(args.attnlab, "config", "--json", "--config",
                                         str(REPO / "configs/tiers" / f"{args.tier}.yaml"),
                                         "--set", f"data.train={root}/bench_train_*.bin",
                                         "--set", f"data.val={root}/bench_val_*.bin"))
        vocab, seq = tier["model"]["vocab_size"], tier["train"]["seq_len"]
        batch = args.batch or tier["train"]["batch_size"]
        per_step = args.tokens_per_step or batch * seq
        write_shard(root / "bench_train_000001.bin", per_step * (args.steps + 2) + seq + 1, vocab)
        write_shard(root / "bench_val_000000.bin", 8 * seq + 1, vocab)
        (root / "tokenizer.json").write_text(json.dumps({"tokenizer": "bytes", "vocab_size": vocab, "source": "random tokens (benchmark)"}))
        (root / "run.yaml").write_text(
            f"include:\n  - {REPO / 'configs/tiers' / (args.tier + '.yaml')}\nseed: 1\n"
            f"data: {{train: '{root}/bench_train_*.bin', val: '{root}/bench_val_*.bin', val_tokens: {4 * seq}}}\n"
            "eval: {every: 1000000}\ncheckpoint: {every: 1000000, keep_last: 1}\n")
        for backend in args.backends.split(","):
            for arm in arms:
                out = root / f"{arm}_{backend}"
                cmd = [args.attnlab, "train", "--config", str(root / "run.yaml"), "--set", f"out_dir={out}",
                       "--set", f"model.arm={arm}", "--set", f"attention.backend={backend}",
                       "--set", f"train.device={args.device}", "--set", f"train.threads={args.threads}",
                       "--set", f"train.batch_size={batch}", "--set", f"train.tokens_per_step={per_step}",
                       "--set", f"train.max_steps={args.steps}"] + [x for s in args.set for x in ("--set", s)]
                done = subprocess.run(cmd, capture_output=True, text=True)
                if done.returncode != 0:
                    failures.append(f"{arm} / {backend}: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
                    print(f"{arm} {backend}: FAILED", file=sys.stderr)
                    continue
                lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
                steps = [x for x in lines if "train_loss" in x][args.skip:]
                ms = statistics.median(per_step / x["tokens_per_s"] * 1e3 for x in steps)
                mfu = statistics.median(x["mfu"] for x in steps) if steps and "mfu" in steps[0] else None
                rows.append((arm, backend, ms, per_step / ms * 1e3, mfu))
                print(f"{arm} {backend}: {ms:.1f} ms/step", file=sys.stderr)
    base = {b: ms for arm, b, ms, _, _ in rows if arm == "baseline"}
    print(f"# {args.tier} on {args.device}: batch {batch} x {seq} tokens, {per_step} tokens per step, "
          f"{args.steps} steps (first {args.skip} dropped), median\n")
    print("| arm | backend | step ms | tokens/s | MFU | step / baseline |")
    print("|---|---|---:|---:|---:|---:|")
    for arm, backend, ms, tps, mfu in rows:
        ratio = f"{ms / base[backend]:.3f}" if backend in base else "-"
        print(f"| {arm} | {backend} | {ms:.1f} | {tps:,.0f} | {'-' if mfu is None else f'{100 * mfu:.1f}%'} | {ratio} |")
    for f in failures:
        print(f"\nfailed: {f}")


if __name__ == "__main__":
    main()
