#include "attnlab/init.h"

#include <cmath>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "attnlab/arm_params.h"
#include "attnlab/model.h"
#include "common/seed_mix.h"

namespace attnlab {
namespace {

using seed_mix::splitmix64;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string leaf_of(const std::string& name) { return name.substr(name.rfind('.') + 1); }

// The initial value of one parameter, drawn on the CPU in float32.
at::Tensor initial_value(const std::string& name, const at::Tensor& param, const GPTImpl& model,
                         uint64_t seed) {
  const auto& cfg = model.config();
  auto shape = param.sizes();
  auto cpu = at::TensorOptions().dtype(at::kFloat);
  const auto leaf = leaf_of(name);
  for (const auto& spec : attention_params(model.arm(), cfg.n_head, cfg.head_dim())) {
    if (leaf == spec.name) return at::full(shape, spec.init_value, cpu);
  }
  if (ends_with(name, ".bias")) return at::zeros(shape, cpu);
  if (name.find("ln_") != std::string::npos && ends_with(name, ".weight")) return at::ones(shape, cpu);

  double std = 0.02;
  if (name == "sink_token") std = kSinkTokenInitStd;
  if (ends_with(name, "c_proj.weight")) std = 0.02 / std::sqrt(2.0 * cfg.n_layer);
  auto gen = at::detail::createCPUGenerator(parameter_seed(seed, name));
  return at::normal(0.0, std, shape, gen, cpu);
}

}  // namespace

uint64_t parameter_seed(uint64_t seed, const std::string& name) {
  return splitmix64(seed ^ splitmix64(seed_mix::fnv1a(name)));
}

void init_parameters(GPTImpl& model, uint64_t seed) {
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) {
    auto value = initial_value(item.key(), item.value(), model, seed);
    item.value().copy_(value);
  }
}

}  // namespace attnlab
