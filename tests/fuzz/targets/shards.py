"""Token shards and tokenizer.json (attnlab::ShardSet::open), judged by an independent reader.

A case is a directory: one to three llm.c shards, maybe a tokenizer.json, and vocab.txt (the model's
vocab_size). The shards and tokenizer.json are mutated field by field (count, magic, version, sizes,
out-of-range tokens, wrong JSON types) and byte by byte. This module reads the same directory by
docs/data.md's rules and must reach the same verdict; when both accept, the token count and an
FNV-1a hash of the tokens must agree. So a corrupted file accepted silently, or a good one refused,
is a failure, as is any crash or hang.
"""
from __future__ import annotations

import json
import random
import struct
from pathlib import Path

from .common import Case, mutate_bytes

MAGIC, VERSION, HEADER = 20240520, 1, 1024
KINDS = ("gpt2", "sentencepiece", "bytes")
SNIPPETS = [b"\x00", b"\xff\xff", b"\x00\x00\x00\x00", struct.pack("<i", -1), struct.pack("<i", 2**31 - 1),
            struct.pack("<i", MAGIC), struct.pack("<i", 20240801)]


def fnv1a(tokens: list[int]) -> int:
    h = 0xCBF29CE484222325
    for t in tokens:
        h = ((h ^ (t & 0xFF)) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        h = ((h ^ (t >> 8)) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def shard_bytes(tokens: list[int], magic=MAGIC, version=VERSION, count=None) -> bytes:
    header = struct.pack("<3i", magic, version, len(tokens) if count is None else count) + b"\0" * (HEADER - 12)
    return header + struct.pack(f"<{len(tokens)}H", *tokens)


def reject_constant(name):
    raise ValueError(f"not JSON: {name}")


def finite_float(text):
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number overflow: {text}")  # nlohmann refuses what a double cannot hold
    return value


def finite_int(text):
    value = int(text)
    if abs(value) > 1.7976931348623157e308:
        raise ValueError(f"number overflow: {text[:20]}...")
    return value


def has_lone_surrogate(value) -> bool:
    """JSON escapes may spell a lone UTF-16 surrogate, which is no character (nlohmann refuses it)."""
    if isinstance(value, str):
        return any(0xD800 <= ord(ch) <= 0xDFFF for ch in value)
    if isinstance(value, dict):
        return any(has_lone_surrogate(k) or has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_lone_surrogate(v) for v in value)
    return False


def nesting_depth(value) -> int:
    """Arrays and objects nested around the deepest value (1 for [] or {}), as src/common/json_read.h counts."""
    depth, level = 0, [(value, 1)]
    while level:
        v, d = level.pop()
        if isinstance(v, (dict, list)):
            depth = max(depth, d)
            level.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return depth


def read_tokenizer_json(path: Path, model_vocab: int):
    """(ok, reason): docs/data.md's rules for tokenizer.json, and its vocab_size against the model's."""
    try:
        j = json.loads(path.read_bytes().decode("utf-8"), parse_constant=reject_constant, parse_float=finite_float,
                       parse_int=finite_int)
    except (ValueError, UnicodeDecodeError) as e:
        return False, f"not JSON ({e})"
    if has_lone_surrogate(j):
        return False, "not JSON (a lone surrogate)"
    if nesting_depth(j) > 64:
        return False, "nested deeper than 64 levels"
    if not isinstance(j, dict):
        return False, "not an object"
    if not isinstance(j.get("tokenizer"), str) or j["tokenizer"] not in KINDS:
        return False, "tokenizer"
    vocab = j.get("vocab_size")
    if type(vocab) is not int or not 1 <= vocab <= 65536:
        return False, "vocab_size"
    if "model" in j and j["model"] is not None and (not isinstance(j["model"], str) or not j["model"]):
        return False, "model"
    if "source" in j and not isinstance(j["source"], str):
        return False, "source"
    if "eot" in j and (type(j["eot"]) is not int or not 0 <= j["eot"] < vocab):
        return False, "eot"
    if vocab != model_vocab:
        return False, "vocab_size differs from the model's"
    return True, j["tokenizer"]


def expected(case_dir: Path) -> dict:
    """What the reader must do with `case_dir`: {"ok": False, "why"} or {"ok": True, counts}."""
    vocab = int((case_dir / "vocab.txt").read_text())
    kind = "unknown"
    if (case_dir / "tokenizer.json").exists():
        ok, kind = read_tokenizer_json(case_dir / "tokenizer.json", vocab)
        if not ok:
            return {"ok": False, "why": f"tokenizer.json: {kind}"}
    files = sorted((p for p in case_dir.iterdir() if p.name.endswith(".bin")), key=lambda p: p.name.encode())
    if not files:
        return {"ok": False, "why": "no shard"}
    tokens: list[int] = []
    for f in files:
        if not f.is_file():
            return {"ok": False, "why": f"{f.name} is not a file"}
        data = f.read_bytes()
        if len(data) < HEADER:
            return {"ok": False, "why": f"{f.name} is shorter than the header"}
        magic, version, n = struct.unpack_from("<3i", data)
        if magic != MAGIC or version != VERSION or n < 0 or len(data) != HEADER + 2 * n:
            return {"ok": False, "why": f"{f.name}: header {magic} {version} {n} for {len(data)} bytes"}
        ids = list(struct.unpack_from(f"<{n}H", data, HEADER))
        if ids and max(ids) >= vocab:
            return {"ok": False, "why": f"{f.name}: token {max(ids)} >= {vocab}"}
        tokens += ids
    return {"ok": True, "num_tokens": len(tokens), "fnv1a": fnv1a(tokens), "tokenizer": kind,
            "notes": 0 if kind != "unknown" else 1}


class Target:
    def __init__(self, run, workdir: Path):
        self.run = run

    def _tokenizer_json(self, rng: random.Random, vocab: int) -> tuple[bytes, str]:
        kind = rng.choice(KINDS)
        j = {"tokenizer": kind, "vocab_size": vocab, "model": "tokenizer.model" if kind == "sentencepiece" else None,
             "source": "fuzz", "eot": rng.randrange(vocab)}
        mutation = "valid"
        if rng.random() < 0.4:
            key = rng.choice(["tokenizer", "vocab_size", "model", "source", "eot", "documents"])
            value = rng.choice([None, True, -1, 0, vocab, vocab + 1, 65537, 2**64, 4096.0, "x", "", [1], {"a": 1},
                                rng.randrange(1, 65537), rng.choice(KINDS)])
            if rng.random() < 0.2:
                j.pop(key, None)
                mutation = f"without {key}"
            else:
                j[key] = value
                mutation = f"{key}={value!r}"
        text = json.dumps(j).encode()
        if rng.random() < 0.15:
            text, ops = mutate_bytes(rng, text, [b"NaN", b"\xff", b"{", b"}", b"\"", b","], rng.randint(1, 3))
            mutation += " " + ops
        return text, mutation

    def generate(self, rng: random.Random, path: Path) -> Case:
        path.mkdir()
        vocab = rng.choice([1, 256, 257, 4096, 50257, 65536, rng.randint(1, 65536)])
        (path / "vocab.txt").write_text(str(vocab))
        notes = []
        if rng.random() < 0.6:
            text, what = self._tokenizer_json(rng, vocab if rng.random() < 0.9 else rng.randint(1, 65536))
            (path / "tokenizer.json").write_bytes(text)
            (path / "tokenizer.model").write_bytes(b"a model")
            notes.append(f"tokenizer.json {what}")
        for k in range(rng.randint(1, 3)):
            n = rng.choice([0, 1, 2, rng.randint(0, 3000)])
            top = vocab if rng.random() < 0.95 else min(65536, vocab + rng.randint(1, 10))
            tokens = [rng.randrange(top) for _ in range(n)]
            data = shard_bytes(tokens)
            roll = rng.random()
            if roll < 0.1:
                data = shard_bytes(tokens, count=rng.choice([-1, n + 1, n - 1, 2**31 - 1, -(2**31), 0]))
                notes.append(f"shard {k} count")
            elif roll < 0.15:
                data = shard_bytes(tokens, magic=rng.choice([0, 20240801, MAGIC + 1]), version=rng.choice([1, 2]))
                notes.append(f"shard {k} magic/version")
            elif roll < 0.35:
                data, ops = mutate_bytes(rng, data, SNIPPETS, rng.randint(1, 3))
                notes.append(f"shard {k} {ops}")
            name = f"s_{k:06d}.bin"
            if rng.random() < 0.02:
                (path / name).mkdir()  # a directory the glob matches
                notes.append(f"shard {k} is a directory")
            else:
                (path / name).write_bytes(data)
        return Case(str(path), "; ".join(notes) or "valid", extra={"expected": expected(path)})

    def judge(self, case: Case, verdict) -> str | None:
        want = case.extra["expected"]
        if verdict.kind == "refused":
            return None if not want["ok"] else f"refused a valid set: {verdict.error}"
        if not want["ok"]:
            return f"accepted silently although {want['why']}"
        got = verdict.summary
        for key in ("num_tokens", "fnv1a", "tokenizer", "notes"):
            if got.get(key) != want[key]:
                return f"{key}: read {got.get(key)!r}, expected {want[key]!r}"
        return None
