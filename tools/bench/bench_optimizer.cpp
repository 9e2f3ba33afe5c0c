// Benchmark of the optimizer step: torch::optim::AdamW's per-parameter loop against FusedAdamW
// (fused_adamw.h, the trainer's) over the parameters of a tier's model, the two interleaved step by
// step on the same gradients, median milliseconds per step: CPU time of the process on CPU (with one
// thread, the work itself however loaded the machine is), wall time after a synchronize on CUDA.
//
//   bench_optimizer                          # micro tier's dims on CPU, 1 thread
//   bench_optimizer --device cuda --n-layer 18 --d-model 768 --n-head 12 --vocab-size 50257   # 124m
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <iostream>
#include <memory>
#include <vector>

#include "attnlab/cpu_math.h"
#include "attnlab/fused_adamw.h"
#include "attnlab/init.h"
#include "attnlab/model.h"
#include "attnlab/param_groups.h"
#include "bench_common.h"

namespace {

using namespace attnlab;

/// The trainer's AdamW settings (configs/tiers: betas 0.9 / 0.95, decay 0.1 on the decayed group).
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

}  // namespace

int main(int argc, char** argv) {
  attnlab::warm_up_cpu_vector_math();
  bench::ModelDims dims;
  int64_t steps = 30, threads = 1;
  std::string device_name = "cpu";
  CLI::App app{"AdamW step: torch::optim::AdamW's loop against FusedAdamW, same parameters and gradients"};
  bench::add_model_options(app, dims);
  app.add_option("--steps", steps, "Timed steps of each (after 3 warm-up steps)")->capture_default_str();
  app.add_option("--threads", threads, "Intra-op threads (CPU)")->capture_default_str();
  app.add_option("--device", device_name, "cpu or cuda")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    torch::set_num_threads(static_cast<int>(threads));
    const at::Device device(device_name);
    GPT loop_model(dims.config(64)), fused_model(dims.config(64));
    for (auto* model : {&loop_model, &fused_model}) {
      init_parameters(**model, 1);
      (*model)->to(device);
    }
    auto loop = make<torch::optim::AdamW>(*loop_model);
    auto fused = make<FusedAdamW>(*fused_model);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
    auto sync = [&] {
      if (device.is_cuda()) torch::cuda::synchronize();
    };
    auto timed = [&](GPT& model, torch::optim::AdamW& opt) {
      for (auto& p : model->parameters()) p.mutable_grad() = at::normal(0.0, 1e-2, p.sizes(), gen).to(device);
      sync();
      const double t0 = bench::now_ms(!device.is_cuda());
      opt.step();
      sync();
      return bench::now_ms(!device.is_cuda()) - t0;
    };
    std::vector<double> loop_ms, fused_ms;
    for (int64_t i = 0; i < steps + 3; ++i) {
      const double a = timed(loop_model, *loop), b = timed(fused_model, *fused);
      if (i >= 3) loop_ms.push_back(a), fused_ms.push_back(b);
    }
    int64_t params = 0, tensors = 0;
    for (const auto& p : fused_model->parameters()) params += p.numel(), ++tensors;
    std::cout << fmt::format("# AdamW step on {}, {} thread(s): {} tensors, {:.2f}M parameters, median of {} steps, {}\n\n",
                             device_name, torch::get_num_threads(), tensors, params / 1e6, steps,
                             device.is_cuda() ? "wall time" : "process CPU time")
              << "| optimizer | ms / step |\n|---|---:|\n"
              << fmt::format("| torch::optim::AdamW (loop) | {:.2f} |\n", bench::median(loop_ms))
              << fmt::format("| FusedAdamW (at::_fused_adamw_) | {:.2f} |\n", bench::median(fused_ms))
              << fmt::format("\nloop / fused: {:.2f}x\n", bench::median(loop_ms) / bench::median(fused_ms));
  } catch (const std::exception& e) {
    std::cerr << "bench_optimizer: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
