#!/usr/bin/env python3
"""Writes llm.c-format token shards (SPEC section 6) and tokenizer.json beside them.

Run it with the project's venv python (scripts/setup.sh makes it: $ATTNLAB_VENV/bin/python).

  fineweb  FineWeb-Edu (or classic FineWeb) through the `datasets` library and GPT-2 BPE, as llm.c's
           dev/data/fineweb.py: documents in dataset order, each preceded by <|endoftext|> (50256),
           cut into shards of --shard-size tokens (a document may continue in the next shard), the
           first shard being validation. Needs network and `datasets` (scripts/prepare_fineweb.sh
           installs it into the venv).
  text     Local UTF-8 text files, one document per file, split into train and validation at the
           document level (deterministically, from a hash of each file's relative path), tokenized
           with GPT-2 BPE when its vocabulary files are given, else a BPE vocabulary SentencePiece
           trains on the train documents, else raw UTF-8 bytes.
  bb       The synthetic Bigram-Backcopy task (tools/synthetic_bb.py; Guo et al. 2024): seeded
           documents of --doc-len tokens, each opened by BOS, on which small models form attention
           sinks. Its ids have no text (tokenizer "synthetic"); tokenizer.json records the triggers.

Shard files: <name>_val_000000.bin, ... then <name>_train_<next index>.bin, ...; each is a header of
256 little-endian int32 ([0] = 20240520, [1] = 1, [2] = token count) followed by uint16 tokens.
docs/data.md describes the format, tokenizer.json and the corpus that scripts/prepare_corpus.sh builds.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import io
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import numpy as np
from tqdm import tqdm

MAGIC, VERSION, HEADER_INTS = 20240520, 1, 256
SAMPLE_TOKENS = {"10BT": 10 * 10**9, "100BT": 100 * 10**9}  # FineWeb(-Edu) samples: GPT-2 tokens
GPT2_VOCAB, GPT2_EOT, GPT2_RANKS = 50257, 50256, 50256
# GPT-2's BPE as a .tiktoken file; scripts/setup.sh fetches it (docs/data.md says from where).
DEFAULT_GPT2_TIKTOKEN = os.environ.get("ATTNLAB_GPT2_TIKTOKEN") or os.path.join(
    os.environ.get("ATTNLAB_CACHE", os.path.expanduser("~/.cache/attnlab")), "gpt2", "gpt2.tiktoken")


def fail(message: str) -> None:
    raise SystemExit(f"prepare_data: error: {message}")


def progress(quiet: bool, **kwargs) -> tqdm:
    """A tqdm bar on stderr, redrawn twice a second; none when stderr is not a terminal (tqdm's
    disable=None), as the attnlab commands' progress lines, or with --quiet."""
    return tqdm(file=sys.stderr, mininterval=0.5, dynamic_ncols=True, disable=True if quiet else None, **kwargs)


# ---- shard files ----------------------------------------------------------------------------------

def write_shard(path: str, tokens: np.ndarray) -> None:
    """One llm.c shard, written to a temporary name and renamed so a reader never sees half a file."""
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[0], header[1], header[2] = MAGIC, VERSION, len(tokens)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype="<u2").tobytes())
    os.replace(tmp, path)


@dataclass
class ShardWriter:
    """Packs documents' tokens into shards of exactly shard_size tokens (the last may be shorter)."""
    out_dir: str
    name: str
    shard_size: int
    split_of: Callable[[int], str]  # shard index -> "val" | "train"
    index: int = 0     # of the next shard
    added: int = 0     # tokens so far
    written: list = field(default_factory=list)  # (path, split, tokens)
    _buf: np.ndarray = None
    _fill: int = 0

    def __post_init__(self):
        self._buf = np.empty(self.shard_size, dtype=np.uint16)

    def add(self, tokens: np.ndarray) -> None:
        self.added += len(tokens)
        while len(tokens) > 0:
            take = min(len(tokens), self.shard_size - self._fill)
            self._buf[self._fill:self._fill + take] = tokens[:take]
            self._fill += take
            tokens = tokens[take:]
            if self._fill == self.shard_size:
                self.flush()

    def flush(self) -> None:
        if self._fill == 0:
            return
        split = self.split_of(self.index)
        path = os.path.join(self.out_dir, f"{self.name}_{split}_{self.index:06d}.bin")
        write_shard(path, self._buf[:self._fill])
        self.written.append((path, split, self._fill))
        self.index += 1
        self._fill = 0

    def tokens(self, split: str) -> int:
        return sum(n for _, s, n in self.written if s == split)


def to_uint16(ids: list[int], vocab_size: int) -> np.ndarray:
    arr = np.asarray(ids, dtype=np.int64)
    if len(arr) and (arr.min() < 0 or arr.max() >= min(vocab_size, 1 << 16)):
        fail(f"token id {arr.max()} does not fit vocab {vocab_size} / uint16")
    return arr.astype(np.uint16)


# ---- tokenizers ---------------------------------------------------------------------------------

@dataclass
class Tokenizer:
    kind: str          # "gpt2" | "sentencepiece" | "bytes" | "hf" | "synthetic" (ids without text)
    vocab_size: int
    eot: int           # written before every document
    encode_batch: Callable[[list], list]  # texts -> token id lists (threaded where the library can)
    decode: Callable[[list], str]  # token ids (no separator) -> text (tools/text_codec.py)
    model: str | None = None  # file name beside the shards
    description: str = ""
    # Byte-level tokenizers: token ids -> their bytes, whose UTF-8 `decode` is (text_codec.py streams
    # with it); None where a piece's text depends on its neighbours (SentencePiece)
    decode_bytes: Callable[[list], bytes] | None = None

    def encode(self, text: str) -> list:
        return self.encode_batch([text])[0]


THREADS = os.cpu_count() or 1


def bytes_tokenizer() -> Tokenizer:
    return Tokenizer("bytes", 257, 256, lambda texts: [list(t.encode("utf-8")) for t in texts],
                     lambda ids: bytes(ids).decode("utf-8", errors="replace"),
                     description="UTF-8 bytes 0..255; 256 separates documents", decode_bytes=bytes)


def gpt2_ranks(tiktoken_file: str | None, encoder_json: str | None, vocab_bpe: str | None) -> dict:
    """GPT-2's 50,256 mergeable ranks from local files (tiktoken cannot download here)."""
    os.environ["TIKTOKEN_CACHE_DIR"] = ""  # read local files directly; no cache keyed by path
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks, load_tiktoken_bpe
    if tiktoken_file:
        ranks = load_tiktoken_bpe(tiktoken_file)
    else:
        ranks = data_gym_to_mergeable_bpe_ranks(vocab_bpe_file=vocab_bpe, encoder_json_file=encoder_json)
    if len(ranks) != GPT2_RANKS:
        fail(f"{tiktoken_file or encoder_json}: {len(ranks)} BPE ranks, GPT-2 has {GPT2_RANKS}")
    return ranks


def gpt2_tokenizer(ranks: dict | None) -> Tokenizer:
    """GPT-2 BPE through tiktoken; ranks=None asks tiktoken for its own copy (needs network)."""
    import tiktoken
    if ranks is None:
        enc = tiktoken.get_encoding("gpt2")
    else:
        from tiktoken_ext.openai_public import r50k_pat_str  # GPT-2's pre-tokenizer regex
        enc = tiktoken.Encoding(name="gpt2", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                                special_tokens={"<|endoftext|>": GPT2_EOT})
    assert enc.n_vocab == GPT2_VOCAB and enc.eot_token == GPT2_EOT
    return Tokenizer("gpt2", GPT2_VOCAB, GPT2_EOT,
                     lambda texts: enc.encode_ordinary_batch(texts, num_threads=THREADS),
                     lambda ids: enc.decode(ids, errors="replace"),
                     description="GPT-2 BPE (tiktoken); 50256 = <|endoftext|> separates documents",
                     decode_bytes=enc.decode_bytes)


def sentencepiece_options(vocab_size: int) -> dict:
    # identity normalisation, kept whitespace and byte fallback make decode(encode(text)) == text.
    return dict(model_type="bpe", vocab_size=vocab_size, normalization_rule_name="identity",
                remove_extra_whitespaces=False, byte_fallback=True, split_digits=True,
                allow_whitespace_only_pieces=True, character_coverage=0.9995, max_sentence_length=16384,
                unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=THREADS, minloglevel=2)


def train_sentencepiece(texts: list[str], vocab_size: int, model_path: str) -> Tokenizer:
    """Trains BPE on the non-blank lines of `texts` (deterministic: no sampling of sentences)."""
    import sentencepiece as spm
    print(f"prepare_data: training SentencePiece BPE (vocab {vocab_size}) on {len(texts)} documents",
          file=sys.stderr)
    lines = (line for text in texts for line in text.split("\n") if line.strip())
    proto = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=lines, model_writer=proto,
                                   **sentencepiece_options(vocab_size))
    with open(model_path + ".tmp", "wb") as f:
        f.write(proto.getvalue())
    os.replace(model_path + ".tmp", model_path)
    return sentencepiece_tokenizer(model_path)


def sentencepiece_tokenizer(model_path: str) -> Tokenizer:
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=model_path)
    return Tokenizer("sentencepiece", sp.get_piece_size(), sp.bos_id(),
                     lambda texts: sp.encode(texts, num_threads=THREADS),
                     lambda ids: sp.decode(ids),
                     model=os.path.basename(model_path),
                     description="SentencePiece BPE trained on the train documents; <s> (1) separates "
                                 "documents; byte fallback, identity normalisation")


def hf_tokenizer(directory: str) -> Tokenizer:
    """A transformers tokenizer saved in `directory` (tools/hf_fetch.py --tokenizer-out), for models
    brought in by `attnlab import-hf`: vocab_size is the model's when a config.json is there (Pythia's
    embedding has more rows than its tokenizer has tokens), and its end-of-text token separates documents."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(directory)
    vocab_size = len(tok)
    config = os.path.join(directory, "config.json")
    if os.path.isfile(config):
        with open(config, encoding="utf-8") as f:
            vocab_size = max(vocab_size, int(json.load(f).get("vocab_size", vocab_size)))
    if tok.eos_token_id is None:
        fail(f"{directory}: the tokenizer has no end-of-text token to separate documents")
    return Tokenizer("hf", vocab_size, tok.eos_token_id,
                     lambda texts: tok(texts, add_special_tokens=False)["input_ids"],
                     lambda ids: tok.decode(ids),
                     description=f"transformers tokenizer of {os.path.abspath(directory)}; "
                                 f"{tok.eos_token_id} ({tok.eos_token}) separates documents")


# ---- documents and the train/val split ----------------------------------------------------------

@dataclass
class Document:
    key: str   # path relative to the inputs' common directory: stable across machines
    text: str


def expand_inputs(patterns: list[str]) -> list[str]:
    files = set()
    for pattern in patterns:
        matched = [p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p)]
        if not matched:
            fail(f"{pattern}: matches no file")
        files.update(os.path.abspath(p) for p in matched)
    return sorted(files)


def read_documents(files: list[str]) -> list[Document]:
    root = os.path.commonpath(files) if len(files) > 1 else os.path.dirname(files[0])
    docs = []
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                docs.append(Document(os.path.relpath(path, root), f.read()))
        except UnicodeDecodeError as e:
            fail(f"{path}: not UTF-8 text ({e})")
    return docs


def split_documents(docs: list[Document], val_fraction: float) -> tuple[list[Document], list[Document]]:
    """Documents in the order of sha256(key) go to val until val holds val_fraction of the characters;
    the rest are train. Both keep path order. Depends only on the keys and the texts' lengths."""
    total = sum(len(d.text) for d in docs)
    ranked = sorted(docs, key=lambda d: hashlib.sha256(d.key.encode("utf-8")).hexdigest())
    val_keys, val_chars = set(), 0
    for doc in ranked:
        if val_chars >= val_fraction * total or len(val_keys) == len(docs) - 1:
            break
        val_keys.add(doc.key)
        val_chars += len(doc.text)
    return ([d for d in docs if d.key not in val_keys], [d for d in docs if d.key in val_keys])


# ---- commands -------------------------------------------------------------------------------------

def batched(items: Iterable, size: int) -> Iterator[list]:
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def encode_documents(tok: Tokenizer, texts: Iterable[str], batch: int = 256) -> Iterator[np.ndarray]:
    """Each document's ids preceded by the separator, in input order (llm.c puts <|endoftext|> first)."""
    for chunk in batched(texts, batch):
        for ids in tok.encode_batch(chunk):
            yield to_uint16([tok.eot] + list(ids), tok.vocab_size)


def write_tokenizer_json(out_dir: str, tok: Tokenizer, source: str, extra: dict) -> None:
    meta = {"tokenizer": tok.kind, "vocab_size": tok.vocab_size, "model": tok.model, "source": source,
            "eot": tok.eot, "description": tok.description,
            "format": {"magic": MAGIC, "version": VERSION, "header_int32": HEADER_INTS, "dtype": "uint16"},
            "created_by": "tools/prepare_data.py", **extra}
    path = os.path.join(out_dir, "tokenizer.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)


def sentencepiece_available() -> bool:
    try:
        import sentencepiece  # noqa: F401
    except ImportError:
        return False
    return True


def choose_text_tokenizer(args, train_texts: list[str]) -> Tokenizer:
    have_gpt2_files = bool(args.gpt2_tiktoken or args.gpt2_encoder)
    kind = args.tokenizer
    if kind == "auto":
        kind = "gpt2" if have_gpt2_files else "sentencepiece" if sentencepiece_available() else "bytes"
        print(f"prepare_data: tokenizer {kind}", file=sys.stderr)
    if kind == "gpt2":
        if not have_gpt2_files and os.path.isfile(DEFAULT_GPT2_TIKTOKEN):
            args.gpt2_tiktoken = DEFAULT_GPT2_TIKTOKEN  # fetched by scripts/setup.sh
        if not (args.gpt2_tiktoken or args.gpt2_encoder):
            fail("GPT-2 BPE needs its vocabulary: --gpt2-tiktoken FILE, or --gpt2-encoder encoder.json "
                 f"--gpt2-vocab vocab.bpe (scripts/setup.sh fetches {DEFAULT_GPT2_TIKTOKEN})")
        return gpt2_tokenizer(gpt2_ranks(args.gpt2_tiktoken, args.gpt2_encoder, args.gpt2_vocab))
    if kind == "hf":
        if not args.hf_tokenizer:
            fail("--tokenizer hf needs --hf-tokenizer DIR (a saved transformers tokenizer)")
        return hf_tokenizer(args.hf_tokenizer)
    if kind == "sentencepiece":
        return train_sentencepiece(train_texts, args.vocab_size, os.path.join(args.out, "tokenizer.model"))
    return bytes_tokenizer()


def cmd_text(args) -> dict:
    if bool(args.gpt2_encoder) != bool(args.gpt2_vocab):
        fail("--gpt2-encoder and --gpt2-vocab go together")
    if not 0.0 < args.val_fraction < 1.0:
        fail(f"--val-fraction {args.val_fraction} must be in (0, 1)")
    files = expand_inputs(args.inputs)
    if len(files) < 2:
        fail("need at least two documents (input files) for a document-level train/val split")
    docs = read_documents(files)
    train, val = split_documents(docs, args.val_fraction)
    os.makedirs(args.out, exist_ok=True)
    tok = choose_text_tokenizer(args, [d.text for d in train])
    name = args.name or os.path.basename(os.path.normpath(args.out))
    # Val shards first (index 0, ...), then train, numbered on: the file names of llm.c's tools.
    phase = {"split": "val"}
    writer = ShardWriter(args.out, name, args.shard_size, lambda index: phase["split"])
    for split, split_docs in (("val", val), ("train", train)):
        phase["split"] = split
        with progress(args.quiet, total=len(split_docs), desc=f"{split} documents", unit="doc") as bar:
            for tokens in encode_documents(tok, (d.text for d in split_docs)):
                writer.add(tokens)
                bar.update(1)
        writer.flush()
    stats = {
        "documents": {"train": len(train), "val": len(val)},
        "characters": {"train": sum(len(d.text) for d in train), "val": sum(len(d.text) for d in val)},
        "tokens": {"train": writer.tokens("train"), "val": writer.tokens("val")},
        "shards": [os.path.basename(p) for p, _, _ in writer.written],
        "split": {"method": "sha256 of each file's path relative to the inputs' common directory; "
                            "lowest hashes go to val until val holds val_fraction of the characters",
                  "val_fraction": args.val_fraction},
        "val_documents": [d.key for d in val],
    }
    write_tokenizer_json(args.out, tok, args.source or os.path.commonpath(files), stats)
    return stats


def cmd_bb(args) -> dict:
    import synthetic_bb
    try:
        task = synthetic_bb.make_task(args.vocab, args.triggers, args.alpha, args.zipf, args.bos, args.doc_len,
                                      args.seed)
    except ValueError as e:
        fail(str(e))
    for flag, count in (("--train-docs", args.train_docs), ("--val-docs", args.val_docs)):
        if count <= 0:
            fail(f"{flag} {count} must be positive")
    os.makedirs(args.out, exist_ok=True)
    name = args.name or os.path.basename(os.path.normpath(args.out))
    phase = {"split": "val"}
    writer = ShardWriter(args.out, name, args.shard_size, lambda index: phase["split"])
    # Val and train are separate streams of one task (stream seeds 0 and 1): same chain, other draws.
    for stream, (split, count) in enumerate((("val", args.val_docs), ("train", args.train_docs))):
        phase["split"] = split
        docs = synthetic_bb.documents(task, count, stream)
        if split == "val":
            floor = synthetic_bb.loss_floor(task, docs)
        writer.add(docs.reshape(-1))
        writer.flush()
    tok = Tokenizer("synthetic", task.vocab + 1, task.bos, lambda texts: fail("synthetic ids have no text"),
                    lambda ids: fail("synthetic ids have no text"),
                    description=f"Bigram-Backcopy task: content ids 0..{task.vocab - 1}, BOS {task.bos}")
    stats = {"documents": {"train": args.train_docs, "val": args.val_docs},
             "tokens": {"train": writer.tokens("train"), "val": writer.tokens("val")},
             "shards": [os.path.basename(p) for p, _, _ in writer.written],
             "split": {"method": "val and train drawn as separate streams of the same task"},
             "task": {**synthetic_bb.description(task), "val_loss_floor": floor}}
    write_tokenizer_json(args.out, tok, "tools/synthetic_bb.py", stats)
    return stats


def fineweb_documents(version: str, sample: str, streaming: bool) -> Iterable[dict]:
    try:
        from datasets import load_dataset
    except ImportError:
        fail("the fineweb command needs the `datasets` library: scripts/prepare_fineweb.sh installs it "
             "into the venv (or: $ATTNLAB_VENV/bin/pip install datasets)")
    repo = "HuggingFaceFW/fineweb-edu" if version == "edu" else "HuggingFaceFW/fineweb"
    return load_dataset(repo, name=f"sample-{sample}", split="train", streaming=streaming)


def cmd_fineweb(args, documents: Iterable[dict] | None = None) -> dict:
    local = args.gpt2_tiktoken or (DEFAULT_GPT2_TIKTOKEN if os.path.isfile(DEFAULT_GPT2_TIKTOKEN) else None)
    tok = gpt2_tokenizer(gpt2_ranks(local, None, None) if local else None)
    if documents is None:
        documents = fineweb_documents(args.version, args.sample, args.streaming)
    os.makedirs(args.out, exist_ok=True)
    name = "edu_fineweb" if args.version == "edu" else "fineweb"  # llm.c's names
    writer = ShardWriter(args.out, name, args.shard_size, lambda i: "val" if i == 0 else "train")
    # The sample's name is its size in GPT-2 tokens, so the bar's total and ETA hold before the end.
    total = args.max_tokens or SAMPLE_TOKENS.get(args.sample)
    with progress(args.quiet, total=total, desc=f"{name} tokens", unit="tok", unit_scale=True) as bar:
        for tokens in encode_documents(tok, (doc["text"] for doc in documents)):
            writer.add(tokens)
            bar.update(len(tokens))
            if args.max_tokens and writer.added >= args.max_tokens:
                break
    writer.flush()
    repo = "HuggingFaceFW/fineweb-edu" if args.version == "edu" else "HuggingFaceFW/fineweb"
    stats = {"tokens": {"train": writer.tokens("train"), "val": writer.tokens("val")},
             "shards": [os.path.basename(p) for p, _, _ in writer.written],
             "split": {"method": "first shard is val (llm.c dev/data/fineweb.py)"}}
    write_tokenizer_json(args.out, tok, f"{repo} sample-{args.sample} (Hugging Face datasets)", stats)
    return stats


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--quiet", action="store_true", help="no progress bar (there is none unless stderr is a terminal)")
    fw = sub.add_parser("fineweb", parents=[common], help="FineWeb(-Edu) via `datasets`, GPT-2 BPE (needs network)")
    fw.add_argument("--version", choices=["edu", "classic"], default="edu")
    fw.add_argument("--sample", choices=["10BT", "100BT"], default="10BT")
    fw.add_argument("--out", required=True, help="output directory")
    fw.add_argument("--shard-size", type=int, default=10**8, help="tokens per shard (llm.c: 1e8)")
    fw.add_argument("--max-tokens", type=int, default=0, help="stop after about this many tokens (0: all)")
    fw.add_argument("--streaming", action="store_true", help="stream instead of downloading the sample")
    fw.add_argument("--gpt2-tiktoken", help=f"local GPT-2 .tiktoken file (default {DEFAULT_GPT2_TIKTOKEN} "
                                            "when present, else tiktoken downloads its own)")
    tx = sub.add_parser("text", parents=[common], help="local UTF-8 text files, one document per file")
    tx.add_argument("--inputs", nargs="+", required=True, help="files or globs (** recurses)")
    tx.add_argument("--out", required=True, help="output directory")
    tx.add_argument("--name", help="shard name prefix (default: the output directory's name)")
    tx.add_argument("--tokenizer", choices=["auto", "gpt2", "sentencepiece", "bytes", "hf"], default="auto",
                    help="auto: gpt2 when its vocabulary files are given, else sentencepiece, "
                         "else bytes (when sentencepiece is not installed); hf: --hf-tokenizer's")
    tx.add_argument("--hf-tokenizer", help="directory of a saved transformers tokenizer (e.g. Pythia's, "
                                           "tools/hf_fetch.py --tokenizer-out), for --tokenizer hf")
    tx.add_argument("--vocab-size", type=int, default=4096, help="SentencePiece vocabulary size")
    tx.add_argument("--gpt2-tiktoken", help="GPT-2 BPE as a .tiktoken file")
    tx.add_argument("--gpt2-encoder", help="GPT-2 encoder.json (with --gpt2-vocab)")
    tx.add_argument("--gpt2-vocab", help="GPT-2 vocab.bpe (with --gpt2-encoder)")
    tx.add_argument("--val-fraction", type=float, default=0.05, help="share of characters held out")
    tx.add_argument("--shard-size", type=int, default=10**8, help="tokens per shard")
    tx.add_argument("--source", help="where the text comes from, for tokenizer.json")
    bb = sub.add_parser("bb", parents=[common], help="the synthetic Bigram-Backcopy task (tools/synthetic_bb.py)")
    bb.add_argument("--out", required=True, help="output directory")
    bb.add_argument("--name", help="shard name prefix (default: the output directory's name)")
    bb.add_argument("--vocab", type=int, default=64, help="content tokens (BOS is one more)")
    bb.add_argument("--triggers", type=int, default=3, help="k: the k most frequent tokens trigger a back-copy")
    bb.add_argument("--alpha", type=float, default=0.2, help="Dirichlet concentration of the bigram rows")
    bb.add_argument("--zipf", type=float, default=1.0, help="exponent of the bigram rows' mean law (0: flat)")
    bb.add_argument("--bos", type=int, default=1, help="BOS tokens opening each document")
    bb.add_argument("--doc-len", type=int, default=257, help="tokens per document, BOS included (seq_len + 1)")
    bb.add_argument("--train-docs", type=int, default=16384)
    bb.add_argument("--val-docs", type=int, default=512)
    bb.add_argument("--seed", type=int, default=0, help="the task's seed: its chain and its documents")
    bb.add_argument("--shard-size", type=int, default=10**8, help="tokens per shard")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.shard_size <= 0:
        fail(f"--shard-size {args.shard_size} must be positive")
    commands = {"text": cmd_text, "fineweb": cmd_fineweb, "bb": cmd_bb}
    stats = commands[args.command](args)
    print(json.dumps({k: stats[k] for k in ("documents", "characters", "tokens") if k in stats}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
