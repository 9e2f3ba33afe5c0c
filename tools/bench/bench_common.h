// What the C++ benchmarks share: the model's dimensions as command-line options, a clock that can be
// the process's CPU time (with one thread, the work itself, however loaded the machine is), and the
// median of a run of timings.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <vector>

#include "attnlab/model_config.h"

namespace attnlab::bench {

/// A GPT's dimensions (defaults: the micro tier's).
struct ModelDims {
  int64_t n_layer = 2, n_head = 2, d_model = 128, vocab = 4096;

  /// The ModelConfig of these dimensions with context `block_size`.
  ModelConfig config(int64_t block_size) const {
    ModelConfig cfg;
    cfg.n_layer = n_layer, cfg.n_head = n_head, cfg.d_model = d_model, cfg.vocab_size = vocab;
    cfg.block_size = block_size;
    return cfg;
  }
};

inline void add_model_options(CLI::App& app, ModelDims& dims) {
  app.add_option("--n-layer", dims.n_layer)->capture_default_str();
  app.add_option("--n-head", dims.n_head)->capture_default_str();
  app.add_option("--d-model", dims.d_model)->capture_default_str();
  app.add_option("--vocab-size", dims.vocab)->capture_default_str();
}

/// Milliseconds on the wall clock, or of this process's CPU time when `cpu_clock`.
inline double now_ms(bool cpu_clock) {
  if (cpu_clock) return 1e3 * static_cast<double>(std::clock()) / CLOCKS_PER_SEC;
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace attnlab::bench
