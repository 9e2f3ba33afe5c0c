// Benchmark: forward+backward tokens/s of one training step of every arm on CPU at a small config, on
// one or more attention backends, each arm's step time as a ratio to baseline's on the same backend
// and to the same arm's on the first backend, all from the same run. Arms and backends are
// interleaved round by round so machine drift hits them all alike; the median of the rounds is
// reported.
#include <algorithm>
#include <iostream>
#include <map>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include "attnlab/cpu_math.h"
#include "attnlab/init.h"
#include "attnlab/model.h"
#include "bench_common.h"

namespace {

using namespace attnlab;

struct Options {
  bench::ModelDims dims;
  int64_t batch = 8, seq_len = 256, rounds = 7, threads = 0;
  std::vector<std::string> backends{"reference"};
  std::vector<std::string> arms;  ///< empty = every arm; baseline is always timed (the ratios' yardstick)
  bool cpu_clock = false;
};

double step_seconds(GPT& model, const at::Tensor& x, const at::Tensor& y, bool cpu_clock) {
  const double t0 = bench::now_ms(cpu_clock);
  model->zero_grad();
  lm_loss(model->forward(x), y).backward();
  return 1e-3 * (bench::now_ms(cpu_clock) - t0);
}

}  // namespace

int main(int argc, char** argv) {
  attnlab::warm_up_cpu_vector_math();
  Options o;
  CLI::App app{"Training-step throughput of every arm on CPU, against baseline in the same run"};
  bench::add_model_options(app, o.dims);
  app.add_option("--batch", o.batch)->capture_default_str();
  app.add_option("--seq-len", o.seq_len)->capture_default_str();
  app.add_option("--rounds", o.rounds, "Timed rounds per arm (after one warm-up)")->capture_default_str();
  app.add_option("--threads", o.threads, "Intra-op threads (0 = default)")->capture_default_str();
  app.add_option("--backend", o.backends, "Attention backends (reference | fused | flash | auto; several: compared)")
      ->capture_default_str();
  app.add_option("--arms", o.arms, "Arms to time (default: every arm; baseline is always added)");
  app.add_flag("--cpu-clock", o.cpu_clock, "Time with the process's CPU clock (with --threads 1: immune to machine load)");
  CLI11_PARSE(app, argc, argv);
  if (o.threads > 0) torch::set_num_threads(static_cast<int>(o.threads));

  std::vector<std::pair<std::string, std::string>> cases;  // (arm, backend)
  std::map<std::pair<std::string, std::string>, GPT> models;
  for (const auto& backend : o.backends) {
    for (const auto& arm : all_arms()) {
      const bool wanted = o.arms.empty() || arm.name == "baseline" ||
                          std::find(o.arms.begin(), o.arms.end(), arm.name) != o.arms.end();
      if (!wanted) continue;
      ModelConfig cfg = o.dims.config(o.seq_len);
      cfg.arm = arm.name;
      GPT model(cfg);
      init_parameters(*model, 1);
      model->set_attention_backend(parse_attention_backend(backend));
      cases.emplace_back(arm.name, backend);
      models.emplace(cases.back(), model);
    }
  }
  torch::manual_seed(0);
  const auto x = torch::randint(0, o.dims.vocab, {o.batch, o.seq_len}, torch::kLong);
  const auto y = torch::randint(0, o.dims.vocab, {o.batch, o.seq_len}, torch::kLong);
  std::map<std::pair<std::string, std::string>, std::vector<double>> times;
  for (const auto& c : cases) step_seconds(models.at(c), x, y, o.cpu_clock);  // warm-up
  for (int64_t r = 0; r < o.rounds; ++r)
    for (const auto& c : cases) times[c].push_back(step_seconds(models.at(c), x, y, o.cpu_clock));

  const double tokens = double(o.batch * o.seq_len);
  std::cout << fmt::format("CPU, {} threads, {} clock: n_layer {}, d_model {}, n_head {}, vocab {}, batch {} x {} "
                           "tokens, median of {} rounds\n\n",
                           torch::get_num_threads(), o.cpu_clock ? "process CPU" : "wall", o.dims.n_layer,
                           o.dims.d_model, o.dims.n_head, o.dims.vocab, o.batch, o.seq_len, o.rounds);
  std::cout << "| arm | backend | step ms | tokens/s | step time / baseline | step time / " << o.backends.front()
            << " |\n|---|---|---:|---:|---:|---:|\n";
  for (const auto& [arm, backend] : cases) {
    const double t = bench::median(times[{arm, backend}]);
    const double base = bench::median(times[{"baseline", backend}]);
    const double first = bench::median(times[{arm, o.backends.front()}]);
    std::cout << fmt::format("| {} | {} | {:.1f} | {:.0f} | {:.3f} | {:.3f} |\n", arm, backend, 1e3 * t, tokens / t,
                             t / base, t / first);
  }
  return 0;
}
