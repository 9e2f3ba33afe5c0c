// Benchmark (issue 2): forward+backward tokens/s of one training step of every arm on CPU at a small
// config, each arm's step time as a ratio to baseline's from the same run. Arms are interleaved round
// by round so machine drift hits them all alike; the median of the rounds is reported.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <iostream>
#include <map>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/torch.h>

#include "attnlab/init.h"
#include "attnlab/model.h"

namespace {

using namespace attnlab;

struct Options {
  int64_t n_layer = 2, n_head = 2, d_model = 128, vocab = 4096, batch = 8, seq_len = 256, rounds = 7, threads = 0;
  std::string backend = "reference";
  bool cpu_clock = false;
};

/// Seconds now: wall (steady clock) or this process's CPU time.
double now_seconds(bool cpu_clock) {
  if (cpu_clock) return static_cast<double>(std::clock()) / CLOCKS_PER_SEC;
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double step_seconds(GPT& model, const at::Tensor& x, const at::Tensor& y, bool cpu_clock) {
  const double t0 = now_seconds(cpu_clock);
  model->zero_grad();
  lm_loss(model->forward(x), y).backward();
  return now_seconds(cpu_clock) - t0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Training-step throughput of every arm on CPU, against baseline in the same run"};
  app.add_option("--n-layer", o.n_layer)->capture_default_str();
  app.add_option("--n-head", o.n_head)->capture_default_str();
  app.add_option("--d-model", o.d_model)->capture_default_str();
  app.add_option("--vocab-size", o.vocab)->capture_default_str();
  app.add_option("--batch", o.batch)->capture_default_str();
  app.add_option("--seq-len", o.seq_len)->capture_default_str();
  app.add_option("--rounds", o.rounds, "Timed rounds per arm (after one warm-up)")->capture_default_str();
  app.add_option("--threads", o.threads, "Intra-op threads (0 = default)")->capture_default_str();
  app.add_option("--backend", o.backend, "Attention backend: reference | fused | flash | auto")->capture_default_str();
  app.add_flag("--cpu-clock", o.cpu_clock, "Time with the process's CPU clock (with --threads 1: immune to machine load)");
  CLI11_PARSE(app, argc, argv);
  if (o.threads > 0) torch::set_num_threads(static_cast<int>(o.threads));

  std::vector<std::string> names;
  std::map<std::string, GPT> models;
  for (const auto& arm : all_arms()) {
    ModelConfig cfg;
    cfg.arm = arm.name, cfg.n_layer = o.n_layer, cfg.n_head = o.n_head, cfg.d_model = o.d_model;
    cfg.vocab_size = o.vocab, cfg.block_size = o.seq_len;
    GPT model(cfg);
    init_parameters(*model, 1);
    model->set_attention_backend(parse_attention_backend(o.backend));
    names.push_back(arm.name);
    models.emplace(arm.name, model);
  }
  torch::manual_seed(0);
  const auto x = torch::randint(0, o.vocab, {o.batch, o.seq_len}, torch::kLong);
  const auto y = torch::randint(0, o.vocab, {o.batch, o.seq_len}, torch::kLong);
  std::map<std::string, std::vector<double>> times;
  for (auto& name : names) step_seconds(models.at(name), x, y, o.cpu_clock);  // warm-up
  for (int64_t r = 0; r < o.rounds; ++r)
    for (auto& name : names) times[name].push_back(step_seconds(models.at(name), x, y, o.cpu_clock));

  const double tokens = double(o.batch * o.seq_len);
  const double base = median(times["baseline"]);
  std::cout << fmt::format("CPU, {} threads, backend {}, {} clock: n_layer {}, d_model {}, n_head {}, vocab {}, "
                           "batch {} x {} tokens, median of {} rounds\n\n",
                           torch::get_num_threads(), o.backend, o.cpu_clock ? "process CPU" : "wall", o.n_layer,
                           o.d_model, o.n_head, o.vocab, o.batch, o.seq_len, o.rounds);
  std::cout << "| arm | step ms | tokens/s | step time / baseline |\n|---|---:|---:|---:|\n";
  for (const auto& name : names) {
    const double t = median(times[name]);
    std::cout << fmt::format("| {} | {:.1f} | {:.0f} | {:.3f} |\n", name, 1e3 * t, tokens / t, t / base);
  }
  return 0;
}
