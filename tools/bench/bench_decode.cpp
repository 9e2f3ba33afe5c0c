// Benchmark of KV-cache decoding under a window (docs/windows.md, "KV-cache decoding"): a model whose
// blocks follow a local-global pattern decodes one token at a time from a one-token prompt, and after
// chosen steps the table gives each layer's cache entries and bytes (prepared keys: k, the value
// reads, the routing bias and gates where the arm has them) and the milliseconds of the last step.
// A local layer's cache stops growing at keep_first + W - 1 entries; a global layer's grows with T.
//
//   bench_decode                                  # micro dims, W = 32, pattern LG, 1024 positions
//   bench_decode --window 256 --block-size 4096 --arm sink_logit
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include <iostream>
#include <vector>

#include "attnlab/cpu_math.h"
#include "attnlab/init.h"
#include "attnlab/model.h"
#include "bench_common.h"

namespace {

using namespace attnlab;

int64_t cache_bytes(const PreparedKeys& keys) {
  int64_t bytes = 0;
  for (const auto* t : {&keys.k, &keys.v_read, &keys.routing_bias, &keys.gate})
    if (t->defined()) bytes += t->numel() * static_cast<int64_t>(t->element_size());
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  warm_up_cpu_vector_math();
  CLI::App app{"KV-cache decoding under a sliding window: cache entries and bytes per layer as T grows"};
  bench::ModelDims dims;
  bench::add_model_options(app, dims);
  int64_t block_size = 1024, window = 32, keep_first = 0;
  std::string pattern = "LG", arm = "baseline";
  app.add_option("--block-size", block_size, "positions decoded (the model's context)")->capture_default_str();
  app.add_option("--window", window, "W of the local layers")->capture_default_str();
  app.add_option("--keep-first", keep_first, "kept first positions n")->capture_default_str();
  app.add_option("--pattern", pattern, "layer types, L local / G global, repeated over depth")->capture_default_str();
  app.add_option("--arm", arm, "attention arm")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    at::set_num_threads(1);
    auto cfg = dims.config(block_size);
    cfg.arm = arm, cfg.window = window, cfg.window_pattern = pattern, cfg.window_keep_first = keep_first;
    GPT model(cfg);  // validates the config: an impossible window is named here
    init_parameters(*model, 1);
    torch::NoGradGuard no_grad;
    KVCache cache;
    const auto tokens = torch::randint(0, cfg.vocab_size, {1, block_size - (model->arm().sink_token ? 1 : 0)},
                                       torch::kLong);
    std::cout << fmt::format("# bench_decode: arm {}, W = {}, keep_first = {}, pattern {}, d_model {}, {} layers, "
                             "1 thread, float32\n\n| positions |", arm, window, keep_first, pattern, cfg.d_model,
                             cfg.n_layer);
    for (int64_t l = 0; l < cfg.n_layer; ++l)
      std::cout << fmt::format(" layer {} ({}) entries | KiB |", l, cfg.layer_is_local(l) ? "local" : "global");
    std::cout << " step ms |\n|---:|";
    for (int64_t l = 0; l < cfg.n_layer; ++l) std::cout << "---:|---:|";
    std::cout << "---:|\n";
    for (int64_t t = 0; t < tokens.size(1); ++t) {
      const double t0 = bench::now_ms(false);
      model->forward_cached(tokens.narrow(1, t, 1), cache);
      const double ms = bench::now_ms(false) - t0;
      const int64_t n = cache.length();
      if ((n & (n - 1)) != 0 && n != block_size) continue;  // powers of two and the end
      std::cout << "| " << n << " |";
      for (const auto& layer : cache.layers)
        std::cout << fmt::format(" {} | {:.1f} |", layer.k.size(2), cache_bytes(layer) / 1024.0);
      std::cout << fmt::format(" {:.2f} |\n", ms);
    }
  } catch (const std::exception& e) {
    std::cerr << "bench_decode: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
