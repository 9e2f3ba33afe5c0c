#!/usr/bin/env python3
"""Training check of the GPU check (docs/building.md, "GPU check", step 5): `attnlab train` of the
10m tier's model (6 layers, d_model 384, 6 heads of 64, GPT-2's vocabulary) on a synthetic corpus,
4 x 128 tokens per step,
whose first steps' losses must match a CPU float32 run of the same config within the half-precision
rule (half_precision_rule.h): |loss - cpu| / max(1, |cpu|) <= 2 x that of the reference attention
backend under the same bf16 autocast + 2e-3.

  train_check.py reference --attnlab build/attnlab --out tools/bench/train_check_reference.json   # CPU, once
  train_check.py check --attnlab bundle/bin/attnlab --reference tools/bench/train_check_reference.json
  train_check.py smoke --device cpu       # the GPU check's dry run: a toy model, its CPU reference made now

`reference` trains every arm for the compared steps on the CPU in float32 and writes the losses
(committed beside this script). `check` trains every arm for --steps steps with --backend (auto:
FlashAttention-2 on CUDA) and the compared steps with the reference backend, on --device, then prints a
Markdown table of the losses and exits 1 when a step breaks the rule. The corpus is generated here,
the same bytes on every machine (random.Random(seed)): phrases of 8 tokens in steps of 7 from a
random start, so the loss falls from ln(50257) = 10.8 within the run. Standard library only: the GPU
machine's python needs nothing beyond itself.
"""
import argparse
import array
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VOCAB = 50257
SEQ, BATCH = 128, 4  # 512 tokens per step: the tier's model at a step the CPU reference can afford
COMPARED = 3         # steps whose losses are compared with the CPU's
FLOOR, FACTOR = 2e-3, 2.0  # kHalfRuleFloor and the rule's factor


def phrases(n, seed):
    rng = random.Random(seed)
    out = array.array("H")
    while len(out) < n:
        start = rng.randrange(VOCAB)
        out.extend((start + 7 * t) % VOCAB for t in range(8))
    return out[:n]


def write_shard(path, tokens):
    """llm.c shard: 256 int32 header (magic, version, count), then uint16 tokens."""
    header = array.array("i", [0] * 256)
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        header.tofile(f)
        tokens.tofile(f)


# The smoke test's toy model and step (the same corpus and trainer).
SMOKE = ["model.n_layer=1", "model.n_head=1", "model.d_model=64", "train.seq_len=32", "train.batch_size=2",
         "train.tokens_per_step=64"]


def write_corpus(root, steps):
    write_shard(root / "synth_train_000001.bin", phrases(BATCH * SEQ * (steps + 2) + SEQ + 1, 1))
    write_shard(root / "synth_val_000000.bin", phrases(4 * SEQ + 1, 2))
    (root / "tokenizer.json").write_text(json.dumps({"tokenizer": "bytes", "vocab_size": VOCAB,
                                                     "source": "synthetic phrases (tools/bench/train_check.py)"}))
    (root / "run.yaml").write_text(
        f"include:\n  - {REPO / 'configs/tiers/10m.yaml'}\nseed: 1\n"
        f"data: {{train: '{root}/synth_train_*.bin', val: '{root}/synth_val_*.bin', val_tokens: {4 * SEQ}}}\n"
        f"train: {{batch_size: {BATCH}, seq_len: {SEQ}, tokens_per_step: {BATCH * SEQ}}}\n"
        "optim: {warmup_steps: 10}\neval: {every: 1000000}\ncheckpoint: {every: 1000000, keep_last: 1}\n")


def train(attnlab, root, arm, backend, device, steps, threads, sets=()):
    out = root / f"{arm}_{backend}_{device}_{steps}"
    cmd = [attnlab, "train", "--config", str(root / "run.yaml"), "--set", f"out_dir={out}", "--set", f"model.arm={arm}",
           "--set", f"attention.backend={backend}", "--set", f"train.device={device}",
           "--set", f"train.threads={threads}", "--set", f"train.max_steps={steps}"] + [x for s in sets for x in ("--set", s)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{arm} / {backend} on {device} failed:\n{done.stderr[-3000:]}")
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return [x["train_loss"] for x in lines if "train_loss" in x]


def error(a, b):
    return abs(a - b) / max(1.0, abs(b))


def compare(args, arms, cpu, steps, compared, sets=()):
    """Trains every arm on args.device and prints the table; returns whether every step kept the rule."""
    ok = True
    print(f"# training check: {'toy model' if sets else '10m tier model'}, {steps} steps on {args.device} "
          f"({args.backend}); first {compared} steps against CPU float32\n")
    print("| arm | step | cpu fp32 | reference | " + args.backend + " | error | bound |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for arm in arms:
        got = train(args.attnlab, args.root, arm, args.backend, args.device, steps, args.threads, sets)
        ref = train(args.attnlab, args.root, arm, "reference", args.device, compared, args.threads, sets)
        for step in range(compared):
            c = cpu[arm][step]
            bound = FACTOR * error(ref[step], c) + FLOOR
            err = error(got[step], c)
            ok &= err <= bound
            print(f"| {arm} | {step + 1} | {c:.5f} | {ref[step]:.5f} | {got[step]:.5f} | {err:.2e} | {bound:.2e} |")
        print(f"| {arm} | {len(got)} | - | - | {got[-1]:.5f} | - | - |")
    return ok


def config():
    return {"tier": "10m", "batch": BATCH, "seq_len": SEQ, "compared_steps": COMPARED, "device": "cpu",
            "dtype": "float32", "backend": "reference"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["reference", "check", "smoke"])
    ap.add_argument("--attnlab", default=str(REPO / "build/attnlab"))
    ap.add_argument("--arms", default="baseline,sink_logit")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", help="reference: the JSON file to write")
    ap.add_argument("--reference", default=str(REPO / "tools/bench/train_check_reference.json"))
    args = ap.parse_args()
    arms = args.arms.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        args.root = Path(tmp)
        write_corpus(args.root, max(args.steps, COMPARED))
        if args.mode == "reference":
            losses = {arm: train(args.attnlab, args.root, arm, "reference", "cpu", COMPARED, args.threads) for arm in arms}
            Path(args.out).write_text(json.dumps({"config": config(), "losses": losses}, indent=1) + "\n")
            return
        if args.mode == "smoke":
            cpu = {arm: train(args.attnlab, args.root, arm, "reference", "cpu", 2, args.threads, SMOKE) for arm in arms}
            ok = compare(args, arms, cpu, 3, 2, SMOKE)
        else:
            stored = json.loads(Path(args.reference).read_text())
            if stored["config"] != config():
                raise SystemExit(f"{args.reference} was made for {stored['config']}, not {config()}: remake it")
            ok = compare(args, arms, stored["losses"], args.steps, COMPARED)
        if not ok:
            print("\nFAILED: a step's loss is outside the half-precision rule", file=sys.stderr)
            raise SystemExit(1)


if __name__ == "__main__":
    main()
