"""The Bigram-Backcopy (BB) task: a synthetic corpus on which small transformers form attention sinks.

Guo et al. 2024, "Active-Dormant Attention Heads: Mechanistically Demystifying Extreme-Token
Phenomena in LLMs" (arXiv 2410.13835, section 2), after Bietti et al. 2023's bigram task: every
sequence starts with BOS; a token that is not a trigger is followed by a draw from a fixed bigram
transition matrix P; a trigger token is followed by a copy of the token before it (back-copy). The
triggers are the k most frequent tokens. One- to three-layer models trained on it put almost all
attention on BOS for non-trigger queries (a dormant head, the sink), store a small value at BOS (value
drain) and a large residual norm there (residual peak).

Ours, written from those definitions (ids 0..V-1 are content tokens, V is BOS):
  - P: row i ~ Dirichlet(alpha V w), w_j = (j + 1)^-zipf / sum_k (k + 1)^-zipf, drawn from a seeded
    generator: each row's mean is Zipf's law (as character and word frequencies are, so a few tokens
    are frequent, like Guo et al.'s characters), and small alpha makes rows peaked;
  - triggers: the k tokens of highest stationary probability under P (the chain's own frequency;
    Guo et al. take the most frequent characters of their bigram source);
  - a document: `bos_count` BOS tokens, then x_1 drawn from P's stationary law restricted to
    non-triggers (so a trigger always has a content token before it), then for i >= 1
    x_{i+1} = x_{i-1} if x_i is a trigger, else x_{i+1} ~ P[x_i]. A copied token may itself be a trigger;
    the rule then applies again.
  - documents hold `doc_len` tokens, BOS included: with doc_len = seq_len + 1 and document-aligned
    windows (docs/data.md) every training sequence is one document with BOS at position 0.
Everything is a pure function of the arguments (numpy's PCG64 with the given seed).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BBTask:
    """The task's parameters and its drawn chain. `transition` is (V, V), rows summing to 1."""
    vocab: int            # content tokens 0..vocab-1; BOS is `vocab`
    num_triggers: int     # k
    alpha: float          # Dirichlet concentration of P's rows (per token)
    zipf: float           # exponent of the rows' mean law
    bos_count: int        # BOS tokens opening each document
    doc_len: int          # tokens per document, BOS included
    seed: int
    transition: np.ndarray
    stationary: np.ndarray
    triggers: tuple

    @property
    def bos(self) -> int:
        return self.vocab


def stationary_law(transition: np.ndarray) -> np.ndarray:
    """pi with pi P = pi: the left eigenvector of eigenvalue 1, normalised (P has positive entries)."""
    values, vectors = np.linalg.eig(transition.T)
    pi = np.real(vectors[:, np.argmin(np.abs(values - 1.0))])
    return pi / pi.sum()


def make_task(vocab: int = 64, num_triggers: int = 3, alpha: float = 0.2, zipf: float = 1.0,
              bos_count: int = 1, doc_len: int = 257, seed: int = 0) -> BBTask:
    if vocab < 2:
        raise ValueError(f"vocab {vocab}: need at least 2 content tokens")
    if not 0 < num_triggers < vocab:
        raise ValueError(f"{num_triggers} triggers: must lie in [1, vocab - 1 = {vocab - 1}]")
    if not alpha > 0:
        raise ValueError(f"alpha {alpha} must be positive")
    if not zipf >= 0:
        raise ValueError(f"zipf {zipf} must be >= 0 (0: a flat mean law)")
    if bos_count < 1:
        raise ValueError(f"bos_count {bos_count} must be at least 1")
    if doc_len < bos_count + 2:
        raise ValueError(f"doc_len {doc_len} must hold the {bos_count} BOS and at least 2 content tokens")
    if vocab + 1 > 65536:
        raise ValueError(f"vocab {vocab} + BOS does not fit uint16 tokens")
    rng = np.random.Generator(np.random.PCG64(seed))
    mean = (np.arange(vocab) + 1.0) ** -zipf
    transition = rng.dirichlet(alpha * vocab * mean / mean.sum(), size=vocab)
    # A Dirichlet draw can underflow an entry to 0; a floor keeps the chain irreducible, so pi is unique.
    transition = np.maximum(transition, 1e-12)
    transition /= transition.sum(axis=1, keepdims=True)
    pi = stationary_law(transition)
    triggers = tuple(sorted(int(t) for t in np.argsort(-pi, kind="stable")[:num_triggers]))
    return BBTask(vocab, num_triggers, alpha, zipf, bos_count, doc_len, seed, transition, pi, triggers)


def _first_law(task: BBTask) -> np.ndarray:
    """x_1's law: the stationary law restricted to non-triggers, renormalised."""
    first = task.stationary.copy()
    first[list(task.triggers)] = 0.0
    return first / first.sum()


def _draw(cumulative: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Row r's inverse-CDF draw for uniform u[r]: the first index whose cumulative mass exceeds u."""
    return np.minimum((cumulative <= u[:, None]).sum(axis=1), cumulative.shape[1] - 1)


def documents(task: BBTask, count: int, stream_seed: int) -> np.ndarray:
    """`count` documents as a (count, doc_len) uint16 array; the same arguments give the same array."""
    rng = np.random.Generator(np.random.PCG64([task.seed, stream_seed]))
    out = np.empty((count, task.doc_len), dtype=np.int64)
    out[:, :task.bos_count] = task.bos
    is_trigger = np.zeros(task.vocab, dtype=bool)
    is_trigger[list(task.triggers)] = True
    first_cdf = np.cumsum(_first_law(task))
    b = task.bos_count
    out[:, b] = _draw(np.broadcast_to(first_cdf, (count, task.vocab)), rng.random(count))
    cdf = np.cumsum(task.transition, axis=1)
    for i in range(b, task.doc_len - 1):
        cur = out[:, i]
        drawn = _draw(cdf[cur], rng.random(count))
        copied = out[:, i - 1] if i > b else drawn  # x_1 is never a trigger, so i = b never copies
        out[:, i + 1] = np.where(is_trigger[cur], copied, drawn)
    return out.astype(np.uint16)


def loss_floor(task: BBTask, docs: np.ndarray) -> dict:
    """The best expected loss on `docs` (nats per target), split as eval.trigger_tokens splits it: at
    a trigger query the next token is determined (0); at BOS the next is BOS again (0) or, after the
    last BOS, x_1 (the entropy of its law); elsewhere the entropy of P's row."""
    x = docs[:, :-1].astype(np.int64)  # every query; its target is the token after it
    trigger = np.isin(x, task.triggers)
    row_entropy = -(task.transition * np.log(task.transition)).sum(axis=1)
    first = _first_law(task)
    floor = np.zeros(x.shape)
    content = (x != task.bos) & ~trigger
    floor[content] = row_entropy[x[content]]
    floor[:, task.bos_count - 1] = -(first[first > 0] * np.log(first[first > 0])).sum()
    return {"trigger_share": float(trigger.mean()), "other_nats": float(floor[~trigger].mean()),
            "all_nats": float(floor.mean())}


def description(task: BBTask) -> dict:
    """What tokenizer.json records of the task, so a run's configuration can be checked against it."""
    return {"name": "bigram_backcopy", "reference": "Guo et al. 2024, arXiv 2410.13835, section 2",
            "vocab": task.vocab, "bos": task.bos, "bos_count": task.bos_count, "triggers": list(task.triggers),
            "alpha": task.alpha, "zipf": task.zipf, "doc_len": task.doc_len, "seed": task.seed}
