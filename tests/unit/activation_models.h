// A tiny GPT and a forward pass written out by hand (embeddings, blocks, final LayerNorm, tied head)
// that uses no hook, for checking the hook-based activation probes against.
#pragma once

#include <functional>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "attnlab/batch_sampler.h"
#include "attnlab/init.h"
#include "attnlab/model.h"

namespace attnlab::testing {

inline GPT tiny_gpt(const std::string& arm, at::ScalarType dtype, uint64_t seed = 5) {
  ModelConfig cfg;
  cfg.arm = arm;
  cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 16, cfg.block_size = 16, cfg.vocab_size = 50;
  GPT model(cfg);
  init_parameters(*model, seed);
  model->to(dtype);
  return model;
}

/// GPT-2 initialises biases to zero; give them small random values so bias rows have a norm.
inline void jitter_biases(GPTImpl& model, uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto gen = at::detail::createCPUGenerator(seed);
  for (auto& item : model.named_parameters())
    if (item.key().size() > 5 && item.key().substr(item.key().size() - 5) == ".bias")
      item.value().copy_(at::randn(item.value().sizes(), gen, torch::kDouble).mul(0.02));
}

inline Batch random_batch(int64_t B, int64_t T, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  auto tokens = at::randint(50, {B, T + 1}, gen, torch::kLong);
  return {tokens.narrow(1, 0, T).clone(), tokens.narrow(1, 1, T).clone()};
}

/// Mean loss of the baseline-family model with `edit` applied to the residual stream [B, T, d]
/// after block `layer` (no hooks: the model's modules are called one by one).
inline double loss_by_hand(GPTImpl& m, const Batch& batch, int64_t layer,
                           const std::function<at::Tensor(at::Tensor)>& edit) {
  torch::NoGradGuard no_grad;
  const int64_t T = batch.x.size(1);
  auto x = m.wte(batch.x) + m.wpe(torch::arange(T, torch::kLong));
  for (int64_t l = 0; l <= m.config().n_layer; ++l) {
    if (l == layer) x = edit(x);
    if (l < m.config().n_layer) x = m.h[l]->as<Block>()->forward(x, l);
  }
  auto logits = at::linear(m.ln_f(x), m.wte->weight).narrow(-1, 0, m.config().vocab_size);
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), batch.y.reshape({-1})).item<double>();
}

}  // namespace attnlab::testing
