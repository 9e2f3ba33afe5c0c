// Benchmark of the optimizer step: torch::optim::AdamW's per-parameter loop against FusedAdamW
// (fused_adamw.h, the trainer's) over the parameters of a tier's model, the two interleaved step by
// step on the same gradients, median milliseconds per step: CPU time of the process on CPU (with one
// thread, the work itself however loaded the machine is), wall time after a synchronize on CUDA.
//
//   bench_optimizer                          # micro tier's dims on CPU, 1 thread
//   bench_optimizer --device cuda --n-layer 18 --d-model 768 --n-head 12 --vocab 50257   # 124m
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <iostream>
#include <memory>
#include <vector>

#include "attnlab/fused_adamw.h"
#include "attnlab/init.h"
#include "attnlab/model.h"
#include "attnlab/param_groups.h"

namespace {

using namespace attnlab;

struct Options {
  int64_t n_layer = 2, n_head = 2, d_model = 128, vocab = 4096, steps = 30, threads = 1;
  std::string device = "cpu";
};

template <class Opt>
std::unique_ptr<torch::optim::AdamW> make(GPTImpl& model) {
  const auto groups = parameter_groups(model);
  auto options = [](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> param_groups;
  param_groups.emplace_back(groups.decay, options(0.1));
  param_groups.emplace_back(groups.no_decay, options(0.0));
  return std::make_unique<Opt>(param_groups, torch::optim::AdamWOptions(3e-3));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"AdamW step: torch::optim::AdamW's loop against FusedAdamW, same parameters and gradients"};
  app.add_option("--n-layer", o.n_layer)->capture_default_str();
  app.add_option("--n-head", o.n_head)->capture_default_str();
  app.add_option("--d-model", o.d_model)->capture_default_str();
  app.add_option("--vocab", o.vocab)->capture_default_str();
  app.add_option("--steps", o.steps, "Timed steps of each (after 3 warm-up steps)")->capture_default_str();
  app.add_option("--threads", o.threads, "Intra-op threads (CPU)")->capture_default_str();
  app.add_option("--device", o.device, "cpu or cuda")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    torch::set_num_threads(static_cast<int>(o.threads));
    const at::Device device(o.device);
    ModelConfig cfg;
    cfg.n_layer = o.n_layer, cfg.n_head = o.n_head, cfg.d_model = o.d_model, cfg.vocab_size = o.vocab;
    cfg.block_size = 64;
    GPT loop_model(cfg), fused_model(cfg);
    init_parameters(*loop_model, 1);
    init_parameters(*fused_model, 1);
    loop_model->to(device);
    fused_model->to(device);
    auto loop = make<torch::optim::AdamW>(*loop_model);
    auto fused = make<FusedAdamW>(*fused_model);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
    auto sync = [&] {
      if (device.is_cuda()) torch::cuda::synchronize();
    };
    auto now_ms = [&] {
      if (device.is_cuda()) {
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
      }
      return 1e3 * static_cast<double>(std::clock()) / CLOCKS_PER_SEC;
    };
    auto timed = [&](GPT& model, torch::optim::AdamW& opt) {
      for (auto& p : model->parameters()) p.mutable_grad() = at::normal(0.0, 1e-2, p.sizes(), gen).to(device);
      sync();
      const double t0 = now_ms();
      opt.step();
      sync();
      return now_ms() - t0;
    };
    std::vector<double> loop_ms, fused_ms;
    for (int64_t i = 0; i < o.steps + 3; ++i) {
      const double a = timed(loop_model, *loop), b = timed(fused_model, *fused);
      if (i >= 3) loop_ms.push_back(a), fused_ms.push_back(b);
    }
    int64_t params = 0, tensors = 0;
    for (const auto& p : fused_model->parameters()) params += p.numel(), ++tensors;
    std::cout << fmt::format("# AdamW step on {}, {} thread(s): {} tensors, {:.2f}M parameters, median of {} steps, {}\n\n",
                             o.device, torch::get_num_threads(), tensors, params / 1e6, o.steps,
                             device.is_cuda() ? "wall time" : "process CPU time")
              << "| optimizer | ms / step |\n|---|---:|\n"
              << fmt::format("| torch::optim::AdamW (loop) | {:.2f} |\n", median(loop_ms))
              << fmt::format("| FusedAdamW (at::_fused_adamw_) | {:.2f} |\n", median(fused_ms))
              << fmt::format("\nloop / fused: {:.2f}x\n", median(loop_ms) / median(fused_ms));
  } catch (const std::exception& e) {
    std::cerr << "bench_optimizer: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
