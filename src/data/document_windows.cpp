// Document-aligned window starts: the separator scan and the continuation rule (document_windows.h).
#include "attnlab/document_windows.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace attnlab {

template <>
const NameTable<WindowSampling>& name_table<WindowSampling>() {
  static const NameTable<WindowSampling> table(
      "window sampling", {{WindowSampling::random, "random"}, {WindowSampling::document, "document"}});
  return table;
}

int64_t document_separator(const TokenizerInfo& tokenizer, int64_t model_vocab_size, const std::string& pattern) {
  if (!tokenizer.assumed && tokenizer.eot >= 0) return tokenizer.eot;
  if (tokenizer.assumed && model_vocab_size == kGpt2VocabSize) return kGpt2VocabSize - 1;  // <|endoftext|>
  const auto why = tokenizer.assumed
                       ? fmt::format("there is no tokenizer.json beside the shards and model.vocab_size {} is not "
                                     "GPT-2's {}, so the separator is unknown",
                                     model_vocab_size, kGpt2VocabSize)
                       : fmt::format("{} names no \"eot\", so the separator is unknown", tokenizer.file);
  throw DataError(fmt::format("{}: data.sampling: document starts windows at the document separator token, but {}; "
                              "write a tokenizer.json with its \"eot\" (tools/prepare_data.py does) or use "
                              "data.sampling: random",
                              pattern, why));
}

namespace {

// Collects starts in stream order; a start is kept only when its window fits below `limit`.
struct StartCollector {
  int64_t seq_len, limit;
  AlignedWindows out;
  int64_t doc = -1;  // the current document's start; -1 before the first separator

  void add(int64_t start, bool document_start) {
    if (start + seq_len + 1 > limit) return;
    out.starts.push_back(start);
    if (document_start) ++out.at_document_start;
  }
  // The continuations of the current document, which ends at `end`.
  void close(int64_t end) {
    if (doc < 0) return;
    for (int64_t c = doc + seq_len; c + 1 < end; c += seq_len) add(c, false);
  }
  void separator_at(int64_t position) {
    close(position);
    doc = position;
    add(position, true);
  }
};

}  // namespace

AlignedWindows document_windows(const ShardSet& set, int64_t separator, int64_t seq_len, int64_t limit) {
  if (seq_len <= 0) throw std::invalid_argument(fmt::format("seq_len {} must be positive", seq_len));
  limit = std::min(limit, set.num_tokens());
  StartCollector collect{seq_len, limit, {}};
  if (separator < 0 || separator > 0xffff) return {};  // no uint16 token can be it
  const auto sep = static_cast<uint16_t>(separator);
  int64_t base = 0;  // the stream position of the shard's first token
  for (const auto& shard : set.shards()) {
    const int64_t n = std::min(shard.size(), limit - base);
    const uint16_t* tokens = shard.tokens();
    for (int64_t i = 0; i < n; ++i)
      if (tokens[i] == sep) collect.separator_at(base + i);
    base += shard.size();
    if (base >= limit) break;
  }
  collect.close(limit);
  return std::move(collect.out);
}

}  // namespace attnlab
