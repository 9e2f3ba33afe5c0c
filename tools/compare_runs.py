#!/usr/bin/env python3
"""Trains the same tiny runs with two attnlab binaries and diffs every file they write.

A refactoring of the trainer or of the run layer must leave what a run writes unchanged. This script
runs one scenario with each binary, each in its own working directory (relative paths, so the files
name the same paths), on the same synthetic shards, one CPU thread:

  - arms baseline, sink_token and combo2: 12 steps, stopped after 7 (--stop-after) and resumed,
    with gradient accumulation (2 micro-batches), evaluation every 4 steps, checkpoints every 5 and
    the log-spaced steps 1, 2, 4, activation tracking every 3 steps;
  - combo2 resumed once more under a larger budget (a schedule_change record);
  - a branch (--branch-from baseline's step 10, weight decay 0, to step 14);
  - a sweep of two arms and two seeds;
  - a windowed sink_out_gate run with every architecture option, 6 steps; export-hf of it and of combo2,
    and import-hf of both exports;
  - probe and inject on baseline and combo2, activations over the three arms, eval on sink_token.

Then every file of one tree must be in the other, equal byte for byte, except what depends on the
clock or the build: metrics.jsonl's tokens_per_s, elapsed_s and mfu; final.json's wall_time_s,
time_s and git_revision; state.json's git_revision, saved_at and extra.elapsed_s, hence its
state.json.sha256, and rng.cpu (LibTorch seeds the default CPU generator nondeterministically in
every process; training never draws from it); run.lock (a pid); the sweep's per-run logs and its
manifest.json's "updated" time and absolute paths; and each analysis output's "attnlab" provenance
(version and revision). model.safetensors and optimizer.safetensors must be
identical bytes.

    python3 tools/compare_runs.py --base OLD_BUILD/attnlab --new build/attnlab [--work DIR] [--keep]

Exit status 0 when everything compared equal; 1 with each difference listed otherwise.
"""
import argparse
import difflib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

VOCAB = 64

RUN_YAML = """\
tier: compare
seed: 1
out_dir: runs/baseline
model:
  arm: baseline
  n_layer: 2
  n_head: 2
  d_model: 32
  block_size: 32
  vocab_size: 64
data:
  train: data/cmp_train_*.bin
  val: data/cmp_val_*.bin
  val_tokens: 1025
optim:
  lr: 3.0e-3
  warmup_steps: 3
train:
  batch_size: 4
  seq_len: 32
  tokens_per_step: 256
  max_steps: 12
  device: cpu
  threads: 1
  log_every: 1
eval:
  every: 4
checkpoint:
  every: 5
  keep_last: 2
  log_spaced: true
  log_spaced_until: 4
track:
  activations:
    every: 3
    sequences: 2
"""

SWEEP_YAML = """\
name: cmp
base: run.yaml
tiers_dir: .
out: runs/sweep
threads_per_run: 1
set:
  train.max_steps: 6
grid:
  model.arm: [baseline, combo2]
  seed: [1, 2]
"""

ARMS = ["baseline", "sink_token", "combo2"]
MODELING_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python", "attnlab_hf")
# A windowed model with every architecture option: its checkpoints, export and import name every model key.
WINDOWED = [f"model.{kv}" for kv in ("arm=sink_out_gate", "window=9", "window_pattern=LG", "window_keep_first=1",
                                     "rotary_fraction=0.5", "parallel_residual=true", "gelu=erf", "untied_head=true")]
WINDOWED = [a for kv in WINDOWED for a in ("--set", kv)]


def write_shard(path, tokens):
    header = struct.pack("<3i", 20240520, 1, len(tokens)) + b"\0" * (1024 - 12)
    with open(path, "wb") as f:
        f.write(header + struct.pack(f"<{len(tokens)}H", *tokens))


def synthetic_tokens(n, seed):
    """A learnable stream: mostly t+1 mod VOCAB, with a seeded jump now and then (an LCG)."""
    x, t, out = seed, 0, []
    for _ in range(n):
        x = (x * 1103515245 + 12345) % 2 ** 31
        t = (x >> 16) % VOCAB if (x >> 8) % 7 == 0 else (t + 1) % VOCAB
        out.append(t)
    return out


def run(binary, args, cwd, log, ok=(0,)):
    with open(log, "a") as out:
        out.write("$ attnlab " + " ".join(args) + "\n")
        out.flush()
        code = subprocess.call([binary] + args, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    if code not in ok:
        sys.exit(f"{binary} {' '.join(args)} exited with {code} (see {log})")


def scenario(binary, work):
    """Everything the comparison covers, written under `work` by `binary`."""
    os.makedirs(os.path.join(work, "data"))
    write_shard(os.path.join(work, "data", "cmp_train_000001.bin"), synthetic_tokens(20000, 1))
    write_shard(os.path.join(work, "data", "cmp_val_000000.bin"), synthetic_tokens(4000, 2))
    with open(os.path.join(work, "run.yaml"), "w") as f:
        f.write(RUN_YAML)
    with open(os.path.join(work, "sweep.yaml"), "w") as f:
        f.write(SWEEP_YAML)
    log = os.path.join(work, "commands.log")
    train = ["train", "--config", "run.yaml"]
    for arm in ARMS:
        where = ["--set", f"model.arm={arm}", "--set", f"out_dir=runs/{arm}"]
        run(binary, train + where + ["--stop-after", "7"], work, log, ok=(130,))  # interrupted: resumable
        run(binary, train + where, work, log)
    run(binary, train + ["--set", "model.arm=combo2", "--set", "out_dir=runs/combo2", "--set", "train.max_steps=16"],
        work, log)
    run(binary, train + ["--set", "out_dir=runs/branch", "--set", "optim.weight_decay=0", "--set",
                         "train.max_steps=14", "--branch-from", "runs/baseline/checkpoints/step_000010"], work, log)
    run(binary, ["sweep", "--config", "sweep.yaml", "--workers", "1"], work, log)
    run(binary, train + ["--set", "out_dir=runs/windowed", "--set", "train.max_steps=6"] + WINDOWED, work, log)
    for name in ["combo2", "windowed"]:  # the attnlab form of config.json, there and back
        run(binary, ["export-hf", "--checkpoint", f"runs/{name}", "--out", f"hf/{name}", "--tokenizer", "none",
                     "--modeling-dir", MODELING_DIR], work, log)  # a copied binary has no source tree beside it
        run(binary, ["import-hf", f"hf/{name}", "--out", f"runs/imported_{name}", "--step", "6",
                     "--set", "data.val=data/cmp_val_*.bin"], work, log)
    for arm in ["baseline", "combo2"]:
        run(binary, ["probe", "--checkpoint", f"runs/{arm}", "--sequences", "4", "--batch-size", "2", "--quiet",
                     "--out", f"analyses/probe_{arm}"], work, log)
        run(binary, ["inject", "--checkpoint", f"runs/{arm}", "--sequences", "4", "--batch-size", "2", "--quiet",
                     "--out", f"analyses/inject_{arm}"], work, log)
    run(binary, ["activations", "--runs"] + [f"runs/{arm}" for arm in ARMS] + ["--sequences", "2", "--quiet",
                                                                               "--out", "analyses/activations"],
        work, log)
    with open(os.path.join(work, "analyses", "eval.txt"), "w") as out:
        subprocess.check_call([binary, "eval", "--checkpoint", "runs/sink_token", "--tokens", "513",
                               "--batch-size", "2"], cwd=work, stdout=out, stderr=subprocess.DEVNULL)


NUMBER = r"-?[0-9][0-9.eE+-]*"
STRING = r'"(?:[^"\\]|\\.)*"'


def masked(rel, text, revisions, places):
    """The file's text with what may differ between the binaries (clock, build, where each tree and
    binary lies) replaced by a mark."""
    name = os.path.basename(rel)
    for revision in revisions:
        text = text.replace(revision, "<REVISION>")
    for place, mark in places:
        text = text.replace(place, mark)
    if name == "metrics.jsonl":
        text = re.sub(rf'"(tokens_per_s|elapsed_s|mfu)":{NUMBER}', r'"\1":<T>', text)
    elif name == "final.json":
        text = re.sub(rf'"wall_time_s": {NUMBER}', '"wall_time_s": <T>', text)
        text = re.sub(r'"time_s": \{[^}]*\}', '"time_s": <T>', text)
    elif name == "state.json":
        text = re.sub(rf'"(saved_at|git_revision)": {STRING}', r'"\1": <T>', text)
        text = re.sub(rf'"elapsed_s": {NUMBER}', '"elapsed_s": <T>', text)
        # The default CPU generator starts from a nondeterministic seed in every process (LibTorch's
        # default); nothing in training draws from it, but a checkpoint records its state.
        text = re.sub(rf'"cpu": {STRING}', '"cpu": <RNG>', text)
    elif name == "manifest.json":
        text = re.sub(rf'"updated": {STRING}', '"updated": <T>', text)
    text = re.sub(rf'"attnlab": {STRING}', '"attnlab": <VERSION>', text)  # provenance of analyses
    return text


def skipped(rel):
    name = os.path.basename(rel)
    return (name in ("run.lock", "state.json.sha256", "commands.log", "sweep.lock") or name.startswith(".") or
            name.endswith(".log"))  # a sweep's per-run logs: timestamps and throughput


def files_under(root):
    out = set()
    for dirpath, _, names in os.walk(root):
        for name in names:
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            if not skipped(rel):
                out.add(rel)
    return out


def revision_of(binary):
    text = subprocess.check_output([binary, "--version"], text=True)
    m = re.search(r"\(([^)]*)\)", text)
    return m.group(1) if m else ""


def compare(base, new, revisions, binaries):
    problems, counts = [], {}
    a, b = files_under(base), files_under(new)
    for rel in sorted(a ^ b):
        problems.append(f"{rel}: only under {'base' if rel in a else 'new'}")
    for rel in sorted(a & b):
        kind = os.path.splitext(rel)[1] or os.path.basename(rel)
        counts[kind] = counts.get(kind, 0) + 1
        with open(os.path.join(base, rel), "rb") as f:
            x = f.read()
        with open(os.path.join(new, rel), "rb") as f:
            y = f.read()
        if x == y:
            continue
        if rel.endswith((".safetensors", ".bin", ".png")):
            problems.append(f"{rel}: bytes differ")
            continue
        tx = masked(rel, x.decode(), revisions, [(os.path.abspath(binaries[0]), "<BINARY>"), (base, "<TREE>")])
        ty = masked(rel, y.decode(), revisions, [(os.path.abspath(binaries[1]), "<BINARY>"), (new, "<TREE>")])
        if tx != ty:
            diff = list(difflib.unified_diff(tx.splitlines(), ty.splitlines(), "base/" + rel, "new/" + rel, lineterm="", n=0))
            problems.append(f"{rel}: differs\n    " + "\n    ".join(diff[:12]))
    return problems, counts


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base", required=True, help="the attnlab binary to compare against")
    p.add_argument("--new", required=True, help="the attnlab binary under test")
    p.add_argument("--work", help="directory to work in (default: a new temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the working directory")
    args = p.parse_args()
    work = os.path.abspath(args.work or tempfile.mkdtemp(prefix="attnlab-compare-"))
    revisions = [r for r in {revision_of(args.base), revision_of(args.new)} if r]
    for label, binary in (("base", args.base), ("new", args.new)):
        scenario(os.path.abspath(binary), os.path.join(work, label))
    problems, counts = compare(os.path.join(work, "base"), os.path.join(work, "new"), revisions, (args.base, args.new))
    print("compared: " + ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())))
    for problem in problems:
        print("DIFFERS " + problem)
    if problems or args.keep or args.work:
        print(f"trees in {work}")
    else:
        shutil.rmtree(work)
    print("identical" if not problems else f"{len(problems)} difference(s)")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
