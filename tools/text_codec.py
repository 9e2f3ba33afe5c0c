#!/usr/bin/env python3
"""Text <-> token ids with a run's tokenizer, for `attnlab sample` (docs/sampling.md).

The tokenizer is the one tools/prepare_data.py wrote the shards with (their tokenizer.json): GPT-2
BPE through tiktoken, SentencePiece through its own library, or UTF-8 bytes. The same library
objects encode the shards, so a prompt is split exactly as the training text was.

    text_codec.py encode --tokenizer sentencepiece --model data/pydoc/tokenizer.model --text "def f(" --out ids.json
    text_codec.py decode --tokenizer sentencepiece --model data/pydoc/tokenizer.model --eot 1 --ids ids.json --out text.txt

encode writes a JSON list of ids (no document separator: the caller adds it); a text that is not
UTF-8 is refused naming its first bad byte. decode reads a JSON list and writes UTF-8 text, each
document separator (--eot) shown as <|endoftext|>. stream reads one id per line on stdin and
writes decode's text of them to stdout as they come, flushed (`attnlab sample`).
"""
from __future__ import annotations

import argparse
import codecs
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


# SentencePiece: ids decoded again before the new ones, so a piece's spacing (it drops a document's
# leading space) comes out as in one decode of everything.
STREAM_CONTEXT = 8


class StreamDecoder:
    """decode() of the ids seen so far, written as they come. A byte-level tokenizer's bytes go
    through Python's incremental UTF-8 decoder (errors="replace", as decode): a character split
    across ids is written once whole, and the text is decode()'s exactly. Otherwise (SentencePiece)
    the new ids' text is what they add after the last STREAM_CONTEXT ids written, held while it ends
    in U+FFFD (a byte-fallback character the next id may finish)."""

    def __init__(self, tok: prepare_data.Tokenizer, eot: int | None, out):
        self.tok, self.eot, self.out = tok, eot, out
        self.context, self.pending = [], []
        self.utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add(self, i: int) -> None:
        if self.eot is not None and i == self.eot:
            self.end_document()
            self.write(SEPARATOR_TEXT)
        elif self.tok.decode_bytes is not None:
            self.write(self.utf8.decode(self.tok.decode_bytes([i])))
        else:
            self.pending.append(i)
            self.flush_pieces(final=False)

    def end_document(self) -> None:
        if self.tok.decode_bytes is not None:
            self.write(self.utf8.decode(b"", final=True))
            self.utf8.reset()
        else:
            self.flush_pieces(final=True)
            self.context = []

    def flush_pieces(self, final: bool) -> None:
        if not self.pending:
            return
        base = self.tok.decode(self.context)
        text = self.tok.decode(self.context + self.pending)
        if not final and (not text.startswith(base) or text.endswith("\ufffd")):
            return
        self.write(text[len(base):] if text.startswith(base) else self.tok.decode(self.pending))
        self.context = (self.context + self.pending)[-STREAM_CONTEXT:]
        self.pending = []

    def write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()


def stream(tok: prepare_data.Tokenizer, eot: int | None, lines, out) -> None:
    decoder = StreamDecoder(tok, eot, out)
    for number, line in enumerate(lines, 1):
        try:
            i = int(line)
        except ValueError:
            prepare_data.fail(f"stream: line {number} is not a token id: {line.strip()!r}")
        if i < 0 or i >= tok.vocab_size:
            prepare_data.fail(f"stream: id {i} is outside the {tok.kind} vocabulary (size {tok.vocab_size})")
        decoder.add(i)
    decoder.end_document()


def utf8_text(text: str) -> str:
    """The --text argument, refused naming its first byte that is not UTF-8 (Python holds such bytes
    of argv as lone surrogates, which no tokenizer can encode)."""
    raw = os.fsencode(text)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        prepare_data.fail(f"the prompt is not valid UTF-8: byte {e.start} (0x{raw[e.start]:02x}) of "
                          f"{len(raw)}: {e.reason}")
    return text


def write_atomically(path: str, text: str) -> None:
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["encode", "decode", "stream"])
    p.add_argument("--tokenizer", required=True, choices=["gpt2", "sentencepiece", "bytes"])
    p.add_argument("--model", help="SentencePiece .model (or GPT-2 .tiktoken) file")
    p.add_argument("--eot", type=int, help="document separator id (decode)")
    p.add_argument("--text", help="text to encode")
    p.add_argument("--ids", help="JSON file with the ids to decode")
    p.add_argument("--out", help="file to write (JSON ids, or UTF-8 text); stream writes to stdout")
    args = p.parse_args(argv)
    tok = load(args.tokenizer, args.model)
    if args.command == "stream":
        out = open(sys.stdout.fileno(), "w", encoding="utf-8", errors="strict", closefd=False)
        stream(tok, args.eot, sys.stdin, out)
        return 0
    if not args.out:
        prepare_data.fail(f"{args.command} needs --out FILE")
    if args.command == "encode":
        if args.text is None:
            prepare_data.fail("encode needs --text")
        write_atomically(args.out, json.dumps([int(i) for i in tok.encode(utf8_text(args.text))]))
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
