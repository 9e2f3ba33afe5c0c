#!/usr/bin/env python3
"""Text <-> token ids with a run's tokenizer, for `attnlab sample` (docs/sampling.md).

The tokenizer is the one tools/prepare_data.py wrote the shards with (their tokenizer.json): GPT-2
BPE through tiktoken, SentencePiece through its own library, or UTF-8 bytes. The same library
objects encode the shards, so a prompt is split exactly as the training text was.

    text_codec.py encode --tokenizer sentencepiece --model data/pydoc/tokenizer.model --text "def f(" --out ids.json
    text_codec.py decode --tokenizer sentencepiece --model data/pydoc/tokenizer.model --eot 1 --ids ids.json --out text.txt

encode writes a JSON list of ids (no document separator: the caller adds it). decode reads a JSON
list and writes UTF-8 text, each document separator (--eot) shown as <|endoftext|>.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import prepare_data  # the same directory: its tokenizers

SEPARATOR_TEXT = "<|endoftext|>"


def load(kind: str, model: str | None) -> prepare_data.Tokenizer:
    if kind == "bytes":
        return prepare_data.bytes_tokenizer()
    if kind == "sentencepiece":
        if not model or not os.path.isfile(model):
            prepare_data.fail(f"the SentencePiece model {model!r} does not exist (tokenizer.json's \"model\")")
        return prepare_data.sentencepiece_tokenizer(model)
    if kind == "gpt2":
        local = model or (prepare_data.DEFAULT_GPT2_TIKTOKEN
                          if os.path.isfile(prepare_data.DEFAULT_GPT2_TIKTOKEN) else None)
        if not local:
            prepare_data.fail(f"GPT-2 BPE needs its vocabulary at {prepare_data.DEFAULT_GPT2_TIKTOKEN} "
                              "(scripts/setup.sh fetches it) or --model FILE.tiktoken")
        return prepare_data.gpt2_tokenizer(prepare_data.gpt2_ranks(local, None, None))
    prepare_data.fail(f"unknown tokenizer {kind!r} (gpt2, sentencepiece or bytes)")


def decode(tok: prepare_data.Tokenizer, ids: list[int], eot: int | None) -> str:
    """Documents split at the separator, each decoded on its own, joined by SEPARATOR_TEXT."""
    parts, current = [], []
    for i in ids:
        if eot is not None and i == eot:
            parts.append(current)
            current = []
        else:
            current.append(i)
    parts.append(current)
    return SEPARATOR_TEXT.join(tok.decode(p) for p in parts)


def write_atomically(path: str, text: str) -> None:
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["encode", "decode"])
    p.add_argument("--tokenizer", required=True, choices=["gpt2", "sentencepiece", "bytes"])
    p.add_argument("--model", help="SentencePiece .model (or GPT-2 .tiktoken) file")
    p.add_argument("--eot", type=int, help="document separator id (decode)")
    p.add_argument("--text", help="text to encode")
    p.add_argument("--ids", help="JSON file with the ids to decode")
    p.add_argument("--out", required=True, help="file to write (JSON ids, or UTF-8 text)")
    args = p.parse_args(argv)
    tok = load(args.tokenizer, args.model)
    if args.command == "encode":
        if args.text is None:
            prepare_data.fail("encode needs --text")
        write_atomically(args.out, json.dumps([int(i) for i in tok.encode(args.text)]))
    else:
        if not args.ids:
            prepare_data.fail("decode needs --ids FILE")
        with open(args.ids, encoding="utf-8") as f:
            ids = json.load(f)
        bad = [i for i in ids if not isinstance(i, int) or i < 0 or i >= tok.vocab_size]
        if bad:
            prepare_data.fail(f"{args.ids}: id {bad[0]!r} is outside the {args.tokenizer} vocabulary "
                              f"(size {tok.vocab_size})")
        write_atomically(args.out, decode(tok, ids, args.eot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
