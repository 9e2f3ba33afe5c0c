#!/usr/bin/env python3
"""Seed corpora for the libFuzzer targets (docs/fuzzing.md): the repository's configs, and valid
shards behind their two-byte vocab prefix, so the fuzzers start past the headers.

    python3 tests/fuzz/libfuzzer/make_seeds.py build-libfuzzer
"""
import random
import shutil
import struct
import sys
from pathlib import Path

root = Path(__file__).resolve().parents[3]
out = Path(sys.argv[1] if len(sys.argv) > 1 else "build-libfuzzer")
config, shards = out / "corpus-config", out / "corpus-shards"
config.mkdir(parents=True, exist_ok=True)
shards.mkdir(parents=True, exist_ok=True)
for f in sorted((root / "configs").rglob("*.yaml")):
    shutil.copy(f, config / f"{f.parent.name}_{f.name}")
rng = random.Random(0)
for vocab, n in [(256, 0), (256, 40), (4096, 100), (50257, 7), (65536, 30)]:
    tokens = [rng.randrange(vocab) for _ in range(n)]
    shard = struct.pack("<3i", 20240520, 1, n) + b"\0" * 1012 + struct.pack(f"<{n}H", *tokens)
    (shards / f"vocab{vocab}_n{n}").write_bytes(struct.pack("<H", vocab - 1) + shard)
print(f"seeds in {config} and {shards}")
