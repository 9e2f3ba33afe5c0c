#include "attnlab/batch_sampler.h"
#include "common/seed_mix.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

namespace attnlab {
namespace {

// Separates the data stream's hashes from other users of the seed (init.h's parameter seeds).
constexpr uint64_t kDomain = 0x6174746e64617461ULL;  // "attndata"

using seed_mix::splitmix64;
uint64_t mix(uint64_t h, int64_t v) { return seed_mix::mix(h, static_cast<uint64_t>(v)); }

// floor(key * m / 2^64): uniform in [0, m) without a division or a rejection loop.
int64_t uniform_below(uint64_t key, int64_t m) {
  return static_cast<int64_t>((static_cast<unsigned __int128>(key) * static_cast<uint64_t>(m)) >> 64);
}

Batch windows_to_batch(const ShardSet& tokens, const std::vector<int64_t>& starts, int64_t seq_len) {
  const auto rows = static_cast<int64_t>(starts.size());
  auto window = torch::empty({rows, seq_len + 1}, torch::kLong);  // (rows, T + 1)
  int64_t* out = window.data_ptr<int64_t>();
  for (int64_t r = 0; r < rows; ++r) tokens.read(starts[r], seq_len + 1, out + r * (seq_len + 1));
  using torch::indexing::Slice;
  return {window.index({Slice(), Slice(0, seq_len)}).contiguous(),   // x (rows, T)
          window.index({Slice(), Slice(1, seq_len + 1)}).contiguous()};  // y (rows, T)
}

}  // namespace

BatchSampler::BatchSampler(std::shared_ptr<const ShardSet> train, BatchSamplerOptions options)
    : train_(std::move(train)), options_(options) {
  if (options_.batch_size <= 0 || options_.seq_len <= 0) {
    throw std::invalid_argument(fmt::format("batch_size {} and seq_len {} must be positive",
                                            options_.batch_size, options_.seq_len));
  }
  num_windows_ = train_->num_tokens() - options_.seq_len;
  if (num_windows_ <= 0) {
    throw DataError(fmt::format("{}: {} train tokens, fewer than one window of seq_len + 1 = {}",
                                train_->pattern(), train_->num_tokens(), options_.seq_len + 1));
  }
  if (!options_.document_separator) return;
  aligned_ = document_windows(*train_, *options_.document_separator, options_.seq_len, train_->num_tokens());
  num_windows_ = static_cast<int64_t>(aligned_.starts.size());
  if (num_windows_ == 0) {
    throw DataError(fmt::format("{}: no window of seq_len + 1 = {} tokens starts at a document separator "
                                "(token {}) of the {} train tokens (data.sampling: document)",
                                train_->pattern(), options_.seq_len + 1, *options_.document_separator,
                                train_->num_tokens()));
  }
}

int64_t BatchSampler::window_offset(int64_t step, int64_t index) const {
  const uint64_t key = mix(mix(splitmix64(options_.seed ^ kDomain), step), index);
  const int64_t pick = uniform_below(key, num_windows_);
  return options_.document_separator ? aligned_.starts[static_cast<size_t>(pick)] : pick;
}

Batch BatchSampler::batch(int64_t step, int64_t first) const {
  if (step < 0 || first < 0) {
    throw std::invalid_argument(fmt::format("batch: step {} and first sequence {} must be >= 0", step, first));
  }
  std::vector<int64_t> starts(options_.batch_size);
  for (int64_t r = 0; r < options_.batch_size; ++r) starts[r] = window_offset(step, first + r);
  return windows_to_batch(*train_, starts, options_.seq_len);
}

ValidationSet::ValidationSet(std::shared_ptr<const ShardSet> val, int64_t seq_len, int64_t max_tokens,
                             std::optional<int64_t> document_separator)
    : val_(std::move(val)), seq_len_(seq_len) {
  if (seq_len <= 0) throw std::invalid_argument(fmt::format("seq_len {} must be positive", seq_len));
  const int64_t n = val_->num_tokens();
  const int64_t used = max_tokens <= 0 ? n : std::min(max_tokens, n);
  if (document_separator) {
    aligned_ = document_windows(*val_, *document_separator, seq_len, used);
    aligned_.starts.shrink_to_fit();
    num_sequences_ = static_cast<int64_t>(aligned_.starts.size());
    if (num_sequences_ == 0) {
      throw DataError(fmt::format("{}: no validation sequence of seq_len + 1 = {} tokens starts at a document "
                                  "separator (token {}) in the first {} tokens (of {} available; data.sampling: "
                                  "document)", val_->pattern(), seq_len + 1, *document_separator, used, n));
    }
    return;
  }
  num_sequences_ = used > 0 ? (used - 1) / seq_len : 0;
  if (num_sequences_ == 0) {
    throw DataError(fmt::format("{}: {} validation tokens (of {} available), fewer than one sequence "
                                "of seq_len + 1 = {}", val_->pattern(), used, n, seq_len + 1));
  }
}

int64_t ValidationSet::start_of(int64_t sequence) const {
  return aligned_.starts.empty() ? sequence * seq_len_ : aligned_.starts[static_cast<size_t>(sequence)];
}

Batch ValidationSet::sequences(int64_t first, int64_t count) const {
  if (first < 0 || count < 0 || first + count > num_sequences_) {
    throw std::out_of_range(fmt::format("validation sequences [{}, {}) outside [0, {})", first,
                                        first + count, num_sequences_));
  }
  std::vector<int64_t> starts(count);
  for (int64_t i = 0; i < count; ++i) starts[i] = start_of(first + i);
  return windows_to_batch(*val_, starts, seq_len_);
}

int64_t ValidationSet::num_batches(int64_t batch_size) const {
  if (batch_size <= 0) throw std::invalid_argument(fmt::format("batch_size {} must be positive", batch_size));
  return (num_sequences_ + batch_size - 1) / batch_size;
}

Batch ValidationSet::batch(int64_t index, int64_t batch_size) const {
  const int64_t first = index * batch_size;
  if (index < 0 || index >= num_batches(batch_size)) {
    throw std::out_of_range(fmt::format("validation batch {} outside [0, {})", index, num_batches(batch_size)));
  }
  return sequences(first, std::min(batch_size, num_sequences_ - first));
}

uint64_t ValidationSet::fingerprint() const {
  constexpr int64_t kChunk = 1 << 20;  // bounded memory for a large val set
  uint64_t h = seed_mix::kFnv1aOffset;  // FNV-1a over the ids as little-endian uint16
  std::vector<int64_t> tokens;
  auto hash_range = [&](int64_t begin, int64_t n) {
    for (int64_t start = begin; start < begin + n; start += kChunk) {
      tokens.resize(std::min(kChunk, begin + n - start));
      val_->read(start, static_cast<int64_t>(tokens.size()), tokens.data());
      for (int64_t t : tokens) {
        h = seed_mix::fnv1a_byte(h, static_cast<uint64_t>(t & 0xff));
        h = seed_mix::fnv1a_byte(h, static_cast<uint64_t>(t >> 8));
      }
    }
  };
  if (aligned_.starts.empty()) {
    hash_range(0, num_targets() + 1);  // tokens 0..nT
  } else {
    for (int64_t start : aligned_.starts) hash_range(start, seq_len_ + 1);  // each window in turn
  }
  return h;
}

}  // namespace attnlab
