#!/usr/bin/env python3
"""Converts multiple-choice task files to the token-id task files of eval.tasks (docs/downstream.md).

Run it with the project's venv python. Each item is tokenized with the run's tokenizer (the
tokenizer.json that tools/prepare_data.py wrote beside the shards) the way lm-eval's
loglikelihood requests are: the choice follows the context after --delimiter (" ", lm-eval's
target_delimiter), trailing spaces of the context move to the choice, the pair is encoded whole and
the choice's ids are what follows the context's own ids (lm-eval's _encode_pair); an empty context
becomes the end-of-text id. choice_chars is len() of the choice's text without the delimiter, the
length lm-eval's acc_norm divides by.

  hellaswag  HellaSwag as its authors publish it (hellaswag_val.jsonl: activity_label, ctx_a, ctx_b,
             endings, label), with lm-eval's preprocessing of the query and the endings.
  piqa       PIQA (valid.jsonl: goal, sol1, sol2; --labels valid-labels.lst, one 0/1 a line), as
             lm-eval's prompt "Question: <goal>\\nAnswer:".
  text       Items already in text: {"context": "...", "choices": ["...", ...], "gold": k} a line.
  corpus     A continuation task from a token shard of the run's own corpus (--input a prepare_data.py
             .bin, best its validation shard): each document, from its separator on, cut into windows
             of --context-tokens + --choice-tokens ids; a window's first ids are the context, its
             last the right choice, and spans of as many ids from --choices - 1 other documents the
             wrong ones, drawn with --seed, as is the right one's place. The ids are the shard's own
             (nothing re-encoded); choice_chars is the length of a choice's decoded text (at least 1).
             --limit N keeps N windows drawn with --seed, in the shard's order.

LAMBADA is not converted: lm-eval scores it by whether the last word is the greedy continuation
(and by its perplexity), not by choosing among choices, and task files hold multiple-choice items only.

    task_convert.py hellaswag --input hellaswag_val.jsonl --tokenizer-json data/pydoc/tokenizer.json --out tasks/hellaswag.jsonl
    task_convert.py corpus --input data/pydoc/pydoc_val_000000.bin --tokenizer-json data/pydoc/tokenizer.json --out tasks/pydoc_next.jsonl
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys

import numpy as np

import prepare_data  # the same directory: the tokenizers the shards were written with
import text_codec


def fail(message: str) -> None:
    raise SystemExit(f"task_convert: error: {message}")


def load_tokenizer(tokenizer_json: str) -> prepare_data.Tokenizer:
    """The tokenizer a tokenizer.json names; its "model" is relative to the file's directory."""
    try:
        with open(tokenizer_json, encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{tokenizer_json}: {e}")
    kind, model = meta.get("tokenizer"), meta.get("model")
    if model and not os.path.isabs(model):
        model = os.path.join(os.path.dirname(os.path.abspath(tokenizer_json)), model)
    if kind == "hf":
        return prepare_data.hf_tokenizer(model or os.path.dirname(os.path.abspath(tokenizer_json)))
    try:
        return text_codec.load(kind, model)
    except SystemExit as e:  # prepare_data.fail's message names the file
        fail(f"{tokenizer_json}: {e}")


def encode_pair(tok: prepare_data.Tokenizer, context: str, continuation: str) -> tuple[list, list]:
    """lm-eval's _encode_pair: the context's ids, and the ids that follow them in the whole's."""
    if context == "":
        return [tok.eot], list(tok.encode(continuation))
    spaces = len(context) - len(context.rstrip())
    if spaces:
        continuation = context[-spaces:] + continuation
        context = context[:-spaces]
    whole = list(tok.encode(context + continuation))
    context_ids = list(tok.encode(context))
    return context_ids, whole[len(context_ids):]


def item_ids(tok, context: str, choices: list, gold: int, delimiter: str, where: str) -> dict:
    if not isinstance(context, str) or not isinstance(choices, list) or len(choices) < 2 or \
            not all(isinstance(c, str) and c for c in choices):
        fail(f"{where}: needs a context string and at least two non-empty choice strings")
    if isinstance(gold, bool) or not isinstance(gold, int) or not 0 <= gold < len(choices):
        fail(f"{where}: gold {gold!r} is not the index of one of the {len(choices)} choices")
    pairs = [encode_pair(tok, context, delimiter + c) for c in choices]
    if any(not ids for _, ids in pairs):
        fail(f"{where}: a choice encodes to no token")
    # Each pair's context ids are the same encoding of the same text.
    return {"context": [int(i) for i in pairs[0][0]], "choices": [[int(i) for i in ids] for _, ids in pairs],
            "choice_chars": [len(c) for c in choices], "gold": gold}


def hellaswag_preprocess(text: str) -> str:
    """lm-eval's hellaswag preprocess(): WikiHow's bracketed markers out, double spaces single."""
    text = text.strip().replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    return text.replace("  ", " ")


def hellaswag(doc: dict, where: str) -> tuple[str, list, int]:
    try:
        ctx = doc["ctx_a"] + " " + doc["ctx_b"].capitalize()
        return (hellaswag_preprocess(doc["activity_label"] + ": " + ctx),
                [hellaswag_preprocess(e) for e in doc["endings"]], int(doc["label"]))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        fail(f"{where}: not a HellaSwag line (activity_label, ctx_a, ctx_b, endings, label): {e!r}")


def piqa(doc: dict, label: int, where: str) -> tuple[str, list, int]:
    try:
        return f"Question: {doc['goal']}\nAnswer:", [doc["sol1"], doc["sol2"]], label
    except (KeyError, TypeError) as e:
        fail(f"{where}: not a PIQA line (goal, sol1, sol2): {e!r}")


def read_jsonl(path: str) -> list:
    docs = []
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    try:
                        docs.append((f"{path} line {number}", json.loads(line)))
                    except ValueError as e:
                        fail(f"{path} line {number}: not JSON ({e})")
    except OSError as e:
        fail(f"{path}: {e.strerror or e}")
    if not docs:
        fail(f"{path}: holds no item")
    return docs


def read_labels(path: str | None, count: int) -> list:
    if not path:
        fail("piqa needs --labels (valid-labels.lst: one 0 or 1 a line, as PIQA publishes them)")
    try:
        with open(path, encoding="utf-8") as f:
            labels = [line.strip() for line in f if line.strip()]
    except OSError as e:
        fail(f"{path}: {e.strerror or e}")
    if len(labels) != count or any(label not in ("0", "1") for label in labels):
        fail(f"{path}: needs one label (0 or 1) per item: {len(labels)} lines for {count} items")
    return [int(label) for label in labels]


def read_shard(path: str, vocab_size: int) -> np.ndarray:
    """The tokens of a prepare_data.py shard (its header checked, as attnlab's reader checks it)."""
    try:
        with open(path, "rb") as f:
            header = np.frombuffer(f.read(prepare_data.HEADER_INTS * 4), dtype="<i4")
            tokens = np.frombuffer(f.read(), dtype="<u2")
    except OSError as e:
        fail(f"{path}: {e.strerror or e}")
    if len(header) < prepare_data.HEADER_INTS or header[0] != prepare_data.MAGIC or header[1] != prepare_data.VERSION:
        fail(f"{path}: not a token shard (no header {prepare_data.MAGIC}, version {prepare_data.VERSION})")
    if header[2] != len(tokens):
        fail(f"{path}: the header says {header[2]} tokens, the file holds {len(tokens)}")
    if len(tokens) and int(tokens.max()) >= vocab_size:
        fail(f"{path}: id {int(tokens.max())} is outside the tokenizer's vocabulary ({vocab_size})")
    return tokens


def shard_documents(tokens: np.ndarray, eot: int) -> list:
    """Each document's ids, its leading separator included (prepare_data.py writes one before each)."""
    starts = [int(i) for i in np.flatnonzero(tokens == eot)]
    return [tokens[a:b].tolist() for a, b in zip(starts, starts[1:] + [len(tokens)])]


def corpus_items(args) -> list:
    """Each document cut into windows of --context-tokens + --choice-tokens ids from its separator on;
    a window is an item (its context, then its right choice), the wrong choices spans of other documents."""
    tok = load_tokenizer(args.tokenizer_json)
    n_ctx, n_choice, n_choices = args.context_tokens, args.choice_tokens, args.choices
    if n_ctx < 1 or n_choice < 1 or n_choices < 2:
        fail("corpus needs --context-tokens >= 1, --choice-tokens >= 1 and --choices >= 2")
    docs = shard_documents(read_shard(args.input, tok.vocab_size), tok.eot)
    width = n_ctx + n_choice
    windows = [(k, s) for k, d in enumerate(docs) for s in range(0, len(d) - width + 1, width)]
    donors = [k for k, d in enumerate(docs) if len(d) > n_choice]  # a span after the separator fits
    if not windows or len(donors) < n_choices:
        fail(f"{args.input}: too short for --context-tokens {n_ctx} and --choice-tokens {n_choice}: "
             f"{len(windows)} windows of {width} tokens, {len(donors)} documents of over {n_choice} tokens "
             f"({n_choices} needed for --choices {n_choices})")
    rng = random.Random(args.seed)
    if 0 < args.limit < len(windows):  # drawn from every document, not the first few documents' windows
        windows = sorted(rng.sample(windows, args.limit))
    out = []
    for k, s in windows:
        doc = docs[k]
        wrong = []
        for j in rng.sample([j for j in donors if j != k], n_choices - 1):
            start = rng.randrange(1, len(docs[j]) - n_choice + 1)
            wrong.append(docs[j][start:start + n_choice])
        gold = rng.randrange(n_choices)
        choices = wrong[:gold] + [doc[s + n_ctx:s + width]] + wrong[gold:]
        out.append({"context": doc[s:s + n_ctx], "choices": choices,
                    "choice_chars": [max(1, len(tok.decode(c))) for c in choices], "gold": gold})
    return out


def convert(args) -> list:
    if args.format == "corpus":
        return corpus_items(args)
    if args.format == "lambada":
        fail("LAMBADA is scored by lm-eval as a greedy match of its last word, not as multiple choice; "
             "task files hold multiple-choice items only (docs/downstream.md)")
    tok = load_tokenizer(args.tokenizer_json)
    every = read_jsonl(args.input)
    labels = read_labels(args.labels, len(every)) if args.format == "piqa" else None
    docs = every[: args.limit] if args.limit > 0 else every
    out = []
    for k, (where, doc) in enumerate(docs):
        if args.format == "hellaswag":
            context, choices, gold = hellaswag(doc, where)
        elif args.format == "piqa":
            context, choices, gold = piqa(doc, labels[k], where)
        else:
            if not isinstance(doc, dict) or set(doc) != {"context", "choices", "gold"}:
                fail(f"{where}: a text item has exactly the keys context, choices, gold")
            context, choices, gold = doc["context"], doc["choices"], doc["gold"]
        item = item_ids(tok, context, choices, gold, args.delimiter, where)
        bad = [i for i in item["context"] + sum(item["choices"], []) if not 0 <= i < tok.vocab_size]
        if bad:
            fail(f"{where}: id {bad[0]} is outside the tokenizer's vocabulary ({tok.vocab_size})")
        out.append(item)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("format", choices=["hellaswag", "piqa", "text", "corpus", "lambada"])
    p.add_argument("--input", required=True, help="the task's jsonl file (corpus: a token shard, .bin)")
    p.add_argument("--labels", help="piqa: the labels file (valid-labels.lst)")
    p.add_argument("--tokenizer-json", required=True, help="the run's tokenizer.json (beside its shards)")
    p.add_argument("--delimiter", default=" ", help="text between context and choice (lm-eval's target_delimiter)")
    p.add_argument("--limit", type=int, default=0, help="the first N items only (0: all)")
    p.add_argument("--context-tokens", type=int, default=48, help="corpus: the context's tokens (a document's first window: its separator included)")
    p.add_argument("--choice-tokens", type=int, default=16, help="corpus: each choice's tokens")
    p.add_argument("--choices", type=int, default=4, help="corpus: choices per item (one right)")
    p.add_argument("--seed", type=int, default=0, help="corpus: draws the wrong choices and the right one's place")
    p.add_argument("--out", required=True, help="the task file to write (its stem names the task)")
    args = p.parse_args(argv)
    items = convert(args)
    text_codec.write_atomically(args.out, "".join(json.dumps(i, separators=(",", ":")) + "\n" for i in items))
    print(f"task_convert: {len(items)} items -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
