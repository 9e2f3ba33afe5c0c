#include "config/sizes.h"

#include <cmath>
#include <iterator>
#include <string>

#include <fmt/format.h>

#include "attnlab/model_config.h"

namespace attnlab::sizes {
namespace {

// Below this many "parameter units" count_params' int64 arithmetic cannot overflow (it forms at most
// ~14 such units) and neither can 16 bytes per parameter in double; no machine holds 2^58 parameters.
constexpr double kMaxModelScale = 288230376151711744.0;  // 2^58

}  // namespace

// 1536 -> "1.5 KiB", 2^52 -> "4.0 PiB": a size in the largest binary unit it reaches.
std::string human_bytes(double bytes) {
  static const char* const kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  size_t unit = 0;
  while (bytes >= 1024 && unit + 1 < std::size(kUnits)) bytes /= 1024, ++unit;
  return unit == 0 ? fmt::format("{:.0f} bytes", bytes) : fmt::format("{:.1f} {}", bytes, kUnits[unit]);
}

int64_t micro_batch_tokens(const RunConfig& c) {
  int64_t tokens = 0;
  if (__builtin_mul_overflow(c.train.batch_size, c.train.seq_len, &tokens))
    throw ConfigError(fmt::format("train.batch_size * train.seq_len = {} * {} overflows a 64-bit count",
                                  c.train.batch_size, c.train.seq_len));
  return tokens;
}

void check_products(const RunConfig& c) {
  const int64_t per_step = c.effective_tokens_per_step();
  int64_t run_tokens = 0;
  if (__builtin_mul_overflow(c.total_steps(), per_step, &run_tokens)) {
    const std::string steps = c.train.max_steps > 0
                                  ? fmt::format("train.max_steps = {}", c.train.max_steps)
                                  : fmt::format("train.token_budget = {} ({} steps)", c.train.token_budget,
                                                c.total_steps());
    throw ConfigError(fmt::format("{} of train.tokens_per_step = {} tokens: the run's token count overflows a "
                                  "64-bit count", steps, per_step));
  }
  const auto& m = c.model;
  const double d = double(m.d_model), padded_vocab = std::ceil(double(m.vocab_size) / 64) * 64;
  const double scale = double(m.n_layer) * d * d + (padded_vocab + double(m.block_size) + double(m.n_layer)) * d;
  if (scale > kMaxModelScale) {
    throw ConfigError(fmt::format("model.n_layer = {}, model.d_model = {}, model.vocab_size = {}, model.block_size = "
                                  "{}: about {:.3g} parameters, more than any machine holds",
                                  m.n_layer, m.d_model, m.vocab_size, m.block_size,
                                  12 * double(m.n_layer) * d * d + (padded_vocab + double(m.block_size)) * d));
  }
}

}  // namespace attnlab::sizes

namespace attnlab {

MemoryFloor memory_floor(const RunConfig& c) {
  MemoryFloor floor;
  // fp32 weights and gradients, and AdamW's two moments or (sgd, muon) at least one momentum buffer.
  const double bytes = c.optim.optimizer() == OptimizerName::adamw ? 16.0 : 12.0;
  floor.weights = bytes * double(count_params(c.model).total);
  floor.logits = 2.0 * double(c.train.batch_size) * double(c.train.seq_len) * double(c.model.padded_vocab());
  return floor;
}

void check_fits_memory(const RunConfig& c, double available_bytes, const std::string& device) {
  const auto floor = memory_floor(c);
  if (floor.total() <= available_bytes) return;
  const bool logits = floor.logits > floor.weights;
  throw ConfigError(fmt::format(
      "{}: a training step needs at least {} ({} for the weights, their gradients and the optimizer's state; {} for one "
      "micro-batch's logits) but {} has {}{}",
      logits ? "train.batch_size, train.seq_len, model.vocab_size"
             : "model.n_layer, model.d_model, model.vocab_size, model.block_size",
      sizes::human_bytes(floor.total()), sizes::human_bytes(floor.weights), sizes::human_bytes(floor.logits), device,
      sizes::human_bytes(available_bytes),
      logits ? "; lower train.batch_size (train.tokens_per_step keeps the tokens per step by accumulating)" : ""));
}

}  // namespace attnlab
