"""One metrics.jsonl line as `attnlab watch` reads it (docs/monitoring.md, "What a line must be").

A line is taken whole or not at all: `parse_line` returns the record, or raises BadLine saying what is
wrong, and `scalars` gives every number of an accepted record with its tag. The limits keep a hostile
file from exhausting memory or time: the trainer's lines are a few kilobytes, nested four levels deep.
"""
from __future__ import annotations

import json
import math

MAX_LINE_BYTES = 4 << 20   # the longest line read; the trainer's activation records are a few KB
MAX_DEPTH = 32             # arrays and objects nested in one line
MAX_VALUES = 65536         # numbers in one record
MAX_STEP = 2**63 - 1       # TensorBoard and W&B keep steps as int64
MAX_INT_DIGITS = 20        # an integer beyond int64 (or beyond Python's 4300-digit parse limit)

TAGS = {"train_loss": "loss/train", "val_loss": "loss/val", "lr": "optim/lr", "grad_norm": "optim/grad_norm",
        "tokens_per_s": "speed/tokens_per_s", "mfu": "speed/mfu", "tokens": "progress/tokens",
        "elapsed_s": "progress/elapsed_s"}
# Records with their own prefix: every number but the step goes under it.
PREFIXES = {"activations": "activations", "schedule_change": "schedule"}


class BadLine(ValueError):
    """A metrics.jsonl line that is not a record; the message says why."""


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadLine(f"the number {text[:40]} is beyond double precision")
    return value


def _int64(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS or not -2**63 <= int(text) <= MAX_STEP:
        raise BadLine(f"the integer {text[:40]}{'...' if len(text) > 40 else ''} is beyond 64 bits")
    return int(text)


def _no_constant(name: str):
    raise BadLine(f"{name} is not JSON")


def _unique_keys(pairs: list) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise BadLine(f"the key {key!r} appears twice")
        out[key] = value
    return out


def depth(value) -> int:
    """How deeply arrays and objects nest in `value` (a scalar is 0), without recursion. Raises BadLine
    for a key that is no Unicode text (a lone surrogate escape, "\\ud800"): it could not be a tag."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            for key in item:
                try:
                    key.encode("utf-8")
                except UnicodeEncodeError:
                    raise BadLine(f"the key {key!r} is not Unicode text") from None
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, level + 1)
            if deepest > MAX_DEPTH:
                return deepest
            stack.extend((child, level + 1) for child in children)
    return deepest


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_record(record) -> dict:
    if not isinstance(record, dict):
        raise BadLine(f"not a JSON object but {type(record).__name__}")
    step = record.get("step")
    if "step" not in record:
        raise BadLine("no step")
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= MAX_STEP:
        raise BadLine(f"step {json.dumps(step)[:40]} is not an integer in [0, 2^63)")
    if "type" in record and not isinstance(record["type"], str):
        raise BadLine(f"type {json.dumps(record['type'])[:40]} is not a string")
    for key in TAGS:
        if key in record and record[key] is not None and not is_number(record[key]):
            raise BadLine(f"{key} {json.dumps(record[key])[:40]} is not a number or null")
    return record


def parse_line(raw: bytes) -> dict:
    """The record of one line (without its newline). Raises BadLine."""
    if len(raw) > MAX_LINE_BYTES:
        raise BadLine(f"longer than {MAX_LINE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadLine(f"not UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1})") from None
    try:
        record = json.loads(text, parse_float=_finite_float, parse_int=_int64, parse_constant=_no_constant,
                            object_pairs_hook=_unique_keys)
    except RecursionError:
        raise BadLine(f"nested deeper than {MAX_DEPTH} levels") from None
    except BadLine:
        raise
    except ValueError as e:  # json.JSONDecodeError and the number hooks' own
        raise BadLine(f"not JSON ({e})") from None
    if depth(record) > MAX_DEPTH:
        raise BadLine(f"nested deeper than {MAX_DEPTH} levels")
    return check_record(record)


def _flatten(value, path: str, out: list) -> None:
    """(tag, number) for every number under `value`; list items that carry a "layer" are layer<l>."""
    if is_number(value):
        if len(out) >= MAX_VALUES:
            raise BadLine(f"more than {MAX_VALUES} numbers")
        out.append((path, float(value)))
    elif isinstance(value, dict):
        for key, item in value.items():
            _flatten(item, f"{path}/{key}", out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            layer = item.get("layer") if isinstance(item, dict) else None
            _flatten(item, f"{path}/layer{layer}" if is_number(layer) else f"{path}/{i}", out)


def scalars(record: dict) -> list:
    """Every number of one accepted record but its step, with its TensorBoard tag. Raises BadLine when
    two numbers would share a tag (a key written as "a/b" and as {"a": {"b": ...}}, a layer twice)."""
    out: list = []
    prefix = PREFIXES.get(record.get("type", ""))
    for key, value in record.items():
        if key in ("step", "type"):
            continue
        if prefix:
            _flatten(value, f"{prefix}/{key}", out)
        elif key in TAGS:
            if value is not None:
                out.append((TAGS[key], float(value)))
        elif key == "tasks":  # eval.tasks' accuracies (docs/downstream.md): tasks/<task>/acc, ...
            _flatten(value, "tasks", out)
        else:
            _flatten(value, f"other/{key}", out)
    tags = set()
    for tag, _ in out:
        if tag in tags:
            raise BadLine(f"two numbers for the tag {tag!r}")
        tags.add(tag)
    return out
