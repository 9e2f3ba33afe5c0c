// Deterministic training batches and the fixed validation set (SPEC sections 3 and 6).
//
// Training (sampling with replacement, as nanoGPT's get_batch, not llm.c's sequential reader):
// each optimizer step trains on one global batch of G = tokens_per_step / seq_len sequences.
// Sequence `index` (0 <= index < G) of optimizer step `step` is the window of seq_len + 1
// consecutive tokens of the concatenated train stream (shards in sorted path order) starting at
//     offset = uniform(key, N - seq_len),  N = number of train tokens,
//     key    = mix(mix(splitmix64(seed ^ D), step), index)
// with D = 0x6174746e64617461 ("attndata"), splitmix64 the finaliser of init.h's parameter seeds,
// mix(h, v) = splitmix64(h ^ splitmix64(v)) and uniform(k, m) = floor(k * m / 2^64) (the high
// half of a 128-bit product; its bias is below m / 2^64). Windows never cross the end of the data;
// they may cross shard boundaries, as llm.c's writers split documents across shards. So:
//  - every arm with one seed sees the same data in the same order (the paired-seed protocol);
//  - a run resumed at step k restores its data position from k alone, replaying nothing;
//  - the order does not depend on how a step is split into micro-batches or across data-parallel
//    ranks: rank r's micro-batch m holds sequences [(r M + m) B, (r M + m + 1) B) for M
//    micro-batches of B sequences per rank (docs/distributed.md), so every split trains on the same
//    sequences;
//  - different seeds see different data orders, so seed variance includes data order.
// The cost: within one pass some tokens are drawn twice and some not at all (~1/e unseen after N
// tokens drawn), which matters only when a run makes several passes over a small corpus.
// llm.c reads shards sequentially; that order is the same for every seed and needs a cursor per
// rank, while this one is stateless. docs/data.md gives the reasoning.
//
// Document-aligned windows (a document separator given; data.sampling: document): the starts are
// instead document_windows.h's aligned starts a_0 < a_1 < ... < a_{S-1} of the train stream, and
// sequence `index` of step `step` is the window at a_j, j = uniform(key, S), with the same key, so
// every property above holds; only the set of starts differs.
//
// Validation: the first max_tokens tokens of the val stream, cut into consecutive sequences:
// sequence k has x = tokens[kT, kT + T), y = tokens[kT + 1, kT + T + 1), so every token 1..nT is
// predicted exactly once. Identical for every arm, seed and call. With a document separator,
// sequence k is instead the window at the k-th aligned start of those first max_tokens tokens
// (document_windows.h: document starts and continuations in stream order), so every sequence
// starts at a document start or continues one.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include <ATen/core/Tensor.h>

#include "attnlab/document_windows.h"
#include "attnlab/shards.h"

namespace attnlab {

/// Inputs and targets of a language-model batch. Both int64 on the CPU, shape [rows, seq_len];
/// y[r, t] = x[r, t + 1] within the window (targets shifted by one token).
struct Batch {
  at::Tensor x;
  at::Tensor y;
};

struct BatchSamplerOptions {
  int64_t batch_size = 8;  ///< rows per micro-batch (B)
  int64_t seq_len = 256;   ///< tokens per row (T); each row reads T + 1 tokens
  uint64_t seed = 0;       ///< the run's seed (SPEC section 3)
  /// Set: windows start only at document_windows.h's aligned starts of this separator id
  /// (data.sampling: document, document_separator()); unset: at any token.
  std::optional<int64_t> document_separator;
};

/// Stateless sampler of training windows: every result is a pure function of its arguments.
class BatchSampler {
 public:
  /// Throws DataError naming the pattern when the train stream has fewer than seq_len + 1 tokens
  /// (with a document separator: when no aligned window fits), std::invalid_argument when
  /// batch_size or seq_len is not positive. Aligned starts are found by one scan of the stream.
  BatchSampler(std::shared_ptr<const ShardSet> train, BatchSamplerOptions options);

  /// Start (token index into the concatenated stream) of the window of sequence `index` of
  /// optimizer step `step`'s global batch; in [0, N - seq_len), an aligned start with a document
  /// separator. Any index >= 0 is valid (a batch of
  /// B sequences is the first B of a larger one).
  int64_t window_offset(int64_t step, int64_t index) const;

  /// Sequences [first, first + batch_size) of optimizer step `step`'s global batch: x, y
  /// [batch_size, seq_len]. Throws std::invalid_argument when step or first is negative.
  Batch batch(int64_t step, int64_t first = 0) const;

  const BatchSamplerOptions& options() const { return options_; }
  /// Distinct starts drawn from: N - seq_len, or the number of aligned starts.
  int64_t num_windows() const { return num_windows_; }
  /// Of those, the starts at a document separator (aligned windows; 0 for random windows).
  int64_t num_document_starts() const { return aligned_.at_document_start; }

 private:
  std::shared_ptr<const ShardSet> train_;
  BatchSamplerOptions options_;
  int64_t num_windows_ = 0;
  AlignedWindows aligned_;  ///< empty for random windows
};

/// The fixed validation sequences (see the top of this file).
class ValidationSet {
 public:
  /// max_tokens <= 0: the whole val stream. Uses min(max_tokens, N) tokens, rounded down to whole
  /// sequences: num_sequences = (min(max_tokens, N) - 1) / seq_len; with `document_separator`, the
  /// aligned windows that fit in those tokens. Throws DataError naming the pattern when there is
  /// none, std::invalid_argument when seq_len is not positive.
  ValidationSet(std::shared_ptr<const ShardSet> val, int64_t seq_len, int64_t max_tokens,
                std::optional<int64_t> document_separator = std::nullopt);

  int64_t seq_len() const { return seq_len_; }
  int64_t num_sequences() const { return num_sequences_; }
  int64_t num_targets() const { return num_sequences_ * seq_len_; }  ///< tokens the loss averages
  /// Sequences that start at a document separator (aligned windows; 0 for the consecutive cut).
  int64_t num_document_starts() const { return aligned_.at_document_start; }
  /// The stream position of sequence `sequence`'s first token (0 <= sequence < num_sequences()).
  int64_t start_of(int64_t sequence) const;

  /// Sequences [first, first + count) as x, y [count, seq_len]; throws std::out_of_range outside.
  Batch sequences(int64_t first, int64_t count) const;

  /// ceil(num_sequences / batch_size) batches; batch i holds sequences [i B, min((i+1) B, n)).
  int64_t num_batches(int64_t batch_size) const;
  Batch batch(int64_t index, int64_t batch_size) const;

  /// FNV-1a hash of the token ids used, to record that two runs evaluated on the same tokens:
  /// tokens 0..nT of the consecutive cut; with aligned windows, each sequence's T + 1 tokens in turn.
  uint64_t fingerprint() const;

 private:
  std::shared_ptr<const ShardSet> val_;
  int64_t seq_len_ = 0;
  int64_t num_sequences_ = 0;
  AlignedWindows aligned_;  ///< empty for the consecutive cut
};

}  // namespace attnlab
