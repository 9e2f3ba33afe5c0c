// Document-aligned windows (config key data.sampling: document; docs/data.md, "Document-aligned
// windows"): training and validation sequences that start at a document's separator (BOS at
// position 0, where attention sinks form), packed rather than padded.
//
// Rule, over tokens [0, limit) of a stream of shards (positions are token indices of the
// concatenated stream):
//   - every position s holding the separator is a document start; the document runs to the next
//     separator or to `limit` (its end e). Tokens before the first separator start no window;
//   - a document longer than one window continues at s + kT, k = 1, 2, ..., while s + kT + 1 < e
//     (the window still has a target in its own document): a document of T + 1 tokens is one window;
//   - every window reads T + 1 tokens from its start and may run on into the next document (packing:
//     no padding, no mask, no token wasted); a start whose window would pass `limit` is dropped.
// The starts come in stream order; a scan of the stream at start-up, 8 bytes per start.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnlab/name_table.h"
#include "attnlab/shards.h"

namespace attnlab {

/// Where training windows start (config key data.sampling; unset means random).
enum class WindowSampling {
  random,    ///< any token (batch_sampler.h's uniform offsets, the default)
  document,  ///< a document start or a continuation inside a document (this file's rule)
};

/// random | document.
template <> const NameTable<WindowSampling>& name_table<WindowSampling>();

/// The document separator of shards described by `tokenizer` (the run's tokenizer, TrainValData):
/// its tokenizer.json's `eot`; without tokenizer.json, GPT-2's 50256 when `model_vocab_size` is
/// GPT-2's 50257 (llm.c's shards, as run_tokenizer() assumes). Throws DataError naming `pattern`
/// (the data glob) when the separator is unknown: no tokenizer.json and another vocabulary, or a
/// tokenizer.json without `eot`.
int64_t document_separator(const TokenizerInfo& tokenizer, int64_t model_vocab_size, const std::string& pattern);

/// The window starts of the rule above in stream order, and how many of them are document starts
/// (the rest are continuations).
struct AlignedWindows {
  std::vector<int64_t> starts;
  int64_t at_document_start = 0;
};

/// The aligned windows of T = `seq_len` over tokens [0, min(limit, num_tokens)) of `set`, at
/// separator id `separator`. Empty when no window fits. Throws std::invalid_argument unless seq_len > 0.
AlignedWindows document_windows(const ShardSet& set, int64_t separator, int64_t seq_len, int64_t limit);

}  // namespace attnlab
