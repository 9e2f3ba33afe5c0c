"""What every target shares: the case record and byte-level mutations."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Optional


@dataclass
class Case:
    path: str                 # the input handed to the driver
    mutation: str             # what was done to the seed, for the failure report
    must_refuse: str = ""     # non-empty: the input is corrupt; the refusal must contain this text
    check: Optional[Callable[[dict], Optional[str]]] = None  # an accepted summary -> problem or None
    extra: dict = field(default_factory=dict)


def mutate_bytes(rng: random.Random, data: bytes, snippets: list[bytes], ops: int) -> tuple[bytes, str]:
    """`ops` random edits: flip a byte, insert a snippet, delete or duplicate a span, truncate."""
    out = bytearray(data)
    done = []
    for _ in range(ops):
        op = rng.choice(["flip", "insert", "delete", "duplicate", "truncate"] if out else ["insert"])
        at = rng.randrange(len(out) + 1)
        if op == "flip" and at < len(out):
            out[at] ^= 1 << rng.randrange(8)
        elif op == "insert":
            out[at:at] = rng.choice(snippets)
        elif op == "delete":
            del out[at:at + rng.randint(1, 16)]
        elif op == "duplicate":
            span = bytes(out[at:at + rng.randint(1, 64)])
            out[at:at] = span
        elif op == "truncate":
            del out[at:]
        done.append(op)
    return bytes(out), "bytes:" + "+".join(done)
