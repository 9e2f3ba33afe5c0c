#!/usr/bin/env python3
"""A transformers fast tokenizer for a run's tokenizer, for `attnlab export-hf` (docs/interop.md).

Writes tokenizer.json, tokenizer_config.json and special_tokens_map.json into --out, built with the
`tokenizers` library, so that transformers (and lm-evaluation-harness) load it without sentencepiece
or protobuf and never "convert a slow tokenizer". Run it with the project's venv python.

  hf_tokenizer.py sentencepiece --model data/pydoc/tokenizer.model --eot 1 --context 256 --vocab-size 4096 --out DIR
  hf_tokenizer.py bytes --context 256 --vocab-size 257 --out DIR

sentencepiece: a BPE model as tools/prepare_data.py trains it (identity normalisation, no removal
of extra whitespace, byte fallback, no user-defined pieces; anything else is refused, naming the
setting). The rule that makes the ids the corpus's: SentencePiece's add_dummy_prefix puts "▁" before
the text (prepare_data.py encodes each document whole, so every document starts with it), spaces
become "▁", and the BPE merges every adjacent pair whose concatenation is a piece, the
highest-scored piece first. Here: a Prepend("▁") + Replace(" ", "▁") normaliser, no pre-tokeniser
(SentencePiece does not split the text into words), and a BPE whose merge ranks follow the pieces'
scores, byte fallback on. Decoding strips the one dummy "▁" again, so decode(encode(text)) == text
and re-encoding decoded text gives the same ids. The document separator (--eot, <s> for the
corpus) is the bos and eos token, and the post-processor puts it before a text when special tokens
are asked for (transformers' default): tokenizer(text) is then a document as the shards hold it.
Special tokens in the text stay text (split_special_tokens), as SentencePiece reads them.

bytes: ids 0..255 are the UTF-8 bytes, 256 the separator (prepare_data.py's bytes tokenizer): a BPE
with the 256 byte tokens, no merges, byte fallback.
"""
from __future__ import annotations

import argparse
import os
import sys


def fail(message: str) -> None:
    raise SystemExit(f"hf_tokenizer: error: {message}")


def require(module: str, why: str):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        fail(f"the Python module '{module}' is missing from {sys.executable} ({why}); scripts/setup.sh installs it")


# SentencePiece's piece types (sentencepiece_model.proto).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def read_sentencepiece(path: str):
    require("google.protobuf", "to read the SentencePiece model's settings")
    pb = require("sentencepiece.sentencepiece_model_pb2", "to read the SentencePiece model")
    model = pb.ModelProto()
    try:
        with open(path, "rb") as f:
            model.ParseFromString(f.read())
    except (OSError, Exception) as e:  # protobuf's DecodeError has no common base worth naming
        fail(f"{path}: not a readable SentencePiece model ({e})")
    return model


def check_supported(model, path: str) -> None:
    """Refuses what the fast tokenizer below would not reproduce exactly, naming the setting."""
    norm, trainer = model.normalizer_spec, model.trainer_spec
    problems = []
    if trainer.model_type != trainer.BPE:
        problems.append(f"model_type {trainer.ModelType.Name(trainer.model_type)} (only BPE)")
    if norm.name != "identity" or norm.precompiled_charsmap:
        problems.append(f"normalization_rule_name '{norm.name}' (only 'identity')")
    if norm.remove_extra_whitespaces:
        problems.append("remove_extra_whitespaces true")
    if not norm.escape_whitespaces or trainer.treat_whitespace_as_suffix:
        problems.append("whitespace not escaped as a '▁' prefix")
    if not trainer.byte_fallback:
        problems.append("byte_fallback false")
    if any(p.type in (USER_DEFINED, UNUSED) for p in model.pieces):
        problems.append("user-defined or unused pieces")
    if problems:
        fail(f"{path}: cannot be written as an exact fast tokenizer: {', '.join(problems)} "
             "(tools/prepare_data.py trains BPE, identity, byte fallback)")


def bpe_merges(model) -> list[tuple[str, str]]:
    """Every pair of pieces whose concatenation is a normal piece, ranked by that piece's score
    (highest first; SentencePiece's BPE merges the best-scored pair), then by the left part's length."""
    normal = {p.piece: i for i, p in enumerate(model.pieces) if p.type == NORMAL}
    ranked = sorted(normal.items(), key=lambda item: (-model.pieces[item[1]].score, item[1]))
    merges = []
    for piece, _ in ranked:
        merges.extend((piece[:k], piece[k:]) for k in range(1, len(piece))
                      if piece[:k] in normal and piece[k:] in normal)
    return merges


def sentencepiece_tokenizer(path: str, eot: int):
    tk = require("tokenizers", "to build the fast tokenizer")
    from tokenizers import decoders, models, normalizers, processors
    model = read_sentencepiece(path)
    check_supported(model, path)
    pieces = model.pieces
    if not 0 <= eot < len(pieces) or pieces[eot].type != CONTROL:
        fail(f"--eot {eot} is not a control piece of {path} (the document separator, <s> for prepare_data.py)")
    vocab = {p.piece: i for i, p in enumerate(pieces)}
    unk = next(p.piece for p in pieces if p.type == UNKNOWN)
    bpe = models.BPE(vocab=vocab, merges=bpe_merges(model), unk_token=unk, byte_fallback=True, fuse_unk=True)
    tok = tk.Tokenizer(bpe)
    steps = [normalizers.Replace(" ", "▁")]
    if model.normalizer_spec.add_dummy_prefix:
        steps.insert(0, normalizers.Prepend("▁"))
    tok.normalizer = normalizers.Sequence(steps)
    strip = [decoders.Strip(content=" ", left=1, right=0)] if model.normalizer_spec.add_dummy_prefix else []
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), *strip])
    separator = pieces[eot].piece
    specials = [tk.AddedToken(p.piece, special=True, normalized=False)
                for p in pieces if p.type in (CONTROL, UNKNOWN)]
    tok.add_special_tokens(specials)
    tok.post_processor = processors.TemplateProcessing(single=f"{separator} $A", pair=f"{separator} $A {separator} $B",
                                                       special_tokens=[(separator, eot)])
    return tok, {"bos_token": separator, "eos_token": separator, "unk_token": unk}


def bytes_tokenizer():
    tk = require("tokenizers", "to build the fast tokenizer")
    from tokenizers import decoders, models, processors
    vocab = {f"<0x{b:02X}>": b for b in range(256)}
    separator = "<|endoftext|>"
    tok = tk.Tokenizer(models.BPE(vocab=vocab, merges=[], byte_fallback=True))
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens([tk.AddedToken(separator, special=True, normalized=False)])
    tok.post_processor = processors.TemplateProcessing(single=f"{separator} $A", pair=f"{separator} $A {separator} $B",
                                                       special_tokens=[(separator, 256)])
    return tok, {"bos_token": separator, "eos_token": separator}


def write(tok, special: dict, context: int, out: str) -> None:
    transformers = require("transformers", "to write tokenizer_config.json")
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=context,
                                                split_special_tokens=True, clean_up_tokenization_spaces=False,
                                                **special)
    os.makedirs(out, exist_ok=True)
    fast.save_pretrained(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kind", choices=["sentencepiece", "bytes"])
    p.add_argument("--model", help="the SentencePiece .model (tokenizer.json's \"model\")")
    p.add_argument("--eot", type=int, default=1, help="document separator id (sentencepiece; 1 = <s>)")
    p.add_argument("--context", type=int, required=True, help="model_max_length (the model's block_size)")
    p.add_argument("--vocab-size", type=int, help="the model's vocab_size: refused when the tokenizer's differs")
    p.add_argument("--out", required=True, help="directory to write into")
    args = p.parse_args(argv)
    if args.kind == "sentencepiece":
        if not args.model or not os.path.isfile(args.model):
            fail(f"the SentencePiece model {args.model!r} does not exist (tokenizer.json's \"model\")")
        tok, special = sentencepiece_tokenizer(args.model, args.eot)
    else:
        tok, special = bytes_tokenizer()
    size = tok.get_vocab_size(with_added_tokens=True)
    if args.vocab_size is not None and size != args.vocab_size:
        fail(f"the {args.kind} tokenizer has {size} tokens, the model's vocab_size is {args.vocab_size}")
    write(tok, special, args.context, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
