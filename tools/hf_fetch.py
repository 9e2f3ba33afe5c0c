#!/usr/bin/env python3
"""Downloads revisions of a Hugging Face causal LM (e.g. Pythia's training checkpoints) and saves each
as safetensors, the layout `attnlab import-hf` reads as a checkpoint series (docs/interop.md):

  OUT/step<N>/config.json, model.safetensors      one directory per step

Run it with the project's venv python. Needs network, except for --local, which re-saves a model
directory already on disk (e.g. one holding only pytorch_model.bin) as OUT/step<N>/.

  python tools/hf_fetch.py EleutherAI/pythia-70m --steps pythia --out pythia-70m --tokenizer-out pythia-tok
  python tools/hf_fetch.py --local downloaded/step1000 --steps 1000 --out pythia-70m
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys

# Pythia's 154 revisions: step 0, the powers of two to 512, then every 1000 up to 143000.
PYTHIA_STEPS = [0] + [2 ** i for i in range(10)] + list(range(1000, 143001, 1000))


def fail(message: str) -> None:
    raise SystemExit(f"hf_fetch: error: {message}")


def parse_steps(values: list[str]) -> list[int]:
    if values == ["pythia"]:
        return PYTHIA_STEPS
    try:
        steps = sorted({int(v) for v in values})
    except ValueError:
        fail(f"--steps takes step numbers or 'pythia', got {values}")
    if any(s < 0 for s in steps):
        fail("--steps must be >= 0")
    return steps


def save_revision(source: str, revision: str | None, target: str) -> None:
    """Loads `source` (a hub name at `revision`, or a local directory) and writes it as safetensors."""
    from transformers import AutoModelForCausalLM
    kwargs = {"revision": revision} if revision else {}
    model = AutoModelForCausalLM.from_pretrained(source, dtype="auto", **kwargs)
    tmp = target + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)  # an interrupted run's leftover
    model.save_pretrained(tmp, safe_serialization=True)
    os.replace(tmp, target)  # whole or not at all: a step directory is never half written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("repo", nargs="?", help="hub model name, e.g. EleutherAI/pythia-70m")
    p.add_argument("--local", help="a model directory on disk instead of the hub (one step)")
    p.add_argument("--steps", nargs="+", required=True, help="step numbers (revision step<N>), or 'pythia' for all 154")
    p.add_argument("--out", required=True, help="directory of step<N>/ sub-directories")
    p.add_argument("--tokenizer-out", help="also save the tokenizer (and config.json) here, for prepare_data.py --tokenizer hf")
    args = p.parse_args(argv)
    if bool(args.repo) == bool(args.local):
        fail("give a hub model name or --local DIR, not both")
    steps = parse_steps(args.steps)
    if args.local and len(steps) != 1:
        fail("--local re-saves one directory: give one --steps value")
    os.makedirs(args.out, exist_ok=True)
    for step in steps:
        target = os.path.join(args.out, f"step{step}")
        if os.path.isfile(os.path.join(target, "model.safetensors")):
            print(f"hf_fetch: {target} exists, kept", file=sys.stderr)
            continue
        if os.path.exists(target) and (not os.path.isdir(target) or os.listdir(target)):
            fail(f"{target} exists without model.safetensors; move it away (it is not overwritten)")
        save_revision(args.local or args.repo, None if args.local else f"step{step}", target)
        print(f"hf_fetch: wrote {target}", file=sys.stderr)
    if args.tokenizer_out:
        from transformers import AutoConfig, AutoTokenizer
        source = args.local or args.repo
        revision = {} if args.local else {"revision": f"step{steps[-1]}"}
        AutoTokenizer.from_pretrained(source, **revision).save_pretrained(args.tokenizer_out)
        AutoConfig.from_pretrained(source, **revision).save_pretrained(args.tokenizer_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
