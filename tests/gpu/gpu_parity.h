// What the flash and cudnn GPU suites both hold a kernel backend to (label gpu): one arm call against a
// float64 CPU run under the half-precision rule, and the whole model under bf16 autocast likewise.
// Skipped, with the reason, where no CUDA device exists.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "attnlab/arm.h"
#include "attnlab/device.h"
#include "attnlab/init.h"
#include "attnlab/model.h"
#include "parity/arm_runner.h"
#include "parity/parity_helpers.h"

#define SKIP_WITHOUT_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device (torch::cuda::is_available() is false)"

namespace attnlab::gpu {

inline std::string dtype_name(at::ScalarType t) { return t == at::kBFloat16 ? "bf16" : "f16"; }

/// The inputs of a parity case: seeded values; extreme parameters; or keys sharing a large component,
/// the class a half-precision backward that takes D_i from the rounded o fails (docs/kernels.md).
enum class Inputs { ordinary, extreme, shared_keys };

inline std::string inputs_name(Inputs inputs) {
  return inputs == Inputs::extreme ? " extreme" : inputs == Inputs::shared_keys ? " shared keys" : "";
}

/// Seeded values (parity::arm_values, B = H = 2) from `seed`; extreme: sinks +100 / -100 over heads,
/// gate logits near +200 / -200; shared_keys: parity::with_shared_key_component.
inline parity::ArmLeaves arm_case(uint64_t seed, int64_t T, int64_t d, Inputs inputs) {
  auto l = parity::arm_values(seed, 2, 2, T, d);
  if (inputs == Inputs::extreme) {
    const auto sign = at::tensor({1.0, -1.0}, at::kDouble);
    l.b = 100.0 * sign, l.tau = 1.0 - 25.0 * sign, l.c = 200.0 * sign;
  }
  return inputs == Inputs::shared_keys ? parity::with_shared_key_component(l) : l;
}

/// `backend` on CUDA in `dtype` on the values `v` (already rounded to it), o, lse and every gradient
/// of a loss reading both, within the rule against float64 on the CPU: the reference backend on the
/// GPU in `dtype` and the rounding-P run are the yardsticks, the arm parameters' gradients at
/// kFlashParamFactor.
inline void expect_backend_within_rule(const ArmSpec& arm, const parity::ArmLeaves& v, at::ScalarType dtype,
                                       AttentionBackend backend, const std::string& what) {
  const auto exact = parity::run_arm(arm, parity::as_leaves(v, at::kCPU, at::kDouble), AttentionBackend::reference, true);
  const auto low = parity::run_arm(arm, parity::as_leaves(v, at::kCUDA, dtype), AttentionBackend::reference, true);
  const auto rounding_p = parity::run_arm_rounding_p(arm, parity::as_leaves(v, at::kCUDA, dtype));
  const auto got = parity::run_arm(arm, parity::as_leaves(v, at::kCUDA, dtype), backend, true);
  parity::expect_run_within_rule(got, low, exact, what, {parity::kHalfRuleFloor, 2.0, parity::kFlashParamFactor},
                                 &rounding_p);
}

/// The whole model under bf16 autocast on `backend`: the loss and every gradient against a float64
/// CPU run, the reference backend under the same autocast on the GPU being the yardstick.
inline void expect_model_within_rule_under_autocast(AttentionBackend backend) {
  for (const auto& arm : all_arms()) {
    ModelConfig cfg;
    cfg.arm = arm.name, cfg.n_layer = 2, cfg.n_head = 2, cfg.d_model = 128, cfg.block_size = 80, cfg.vocab_size = 64;
    GPT model(cfg);
    init_parameters(*model, 3);
    auto idx = at::randint(0, 64, {2, 77}, at::TensorOptions().dtype(at::kLong));
    auto run = [&](const at::Device& device, at::ScalarType dtype, AttentionBackend b) {
      model->to(device, dtype);
      model->zero_grad();
      model->set_attention_backend(b);
      at::Tensor loss;
      {
        AutocastGuard autocast(device, device.is_cuda());
        loss = lm_loss(model->forward(idx.to(device)), idx.to(device));
      }
      loss.backward();
      std::vector<at::Tensor> out{loss.detach().to(at::kCPU, at::kDouble)};
      for (const auto& p : model->parameters()) out.push_back(p.grad().to(at::kCPU, at::kDouble));
      return out;
    };
    const auto exact = run(at::kCPU, at::kDouble, AttentionBackend::reference);
    const auto low = run(at::kCUDA, at::kFloat, AttentionBackend::reference);
    const auto got = run(at::kCUDA, at::kFloat, backend);
    const auto names = model->named_parameters().keys();
    for (size_t i = 0; i < exact.size(); ++i) {
      const std::string name = i == 0 ? "loss" : names[i - 1];
      const bool arm_param = name.find("sink_logit") != std::string::npos || name.find("gate_") != std::string::npos;
      parity::expect_within_rule(got[i], parity::normalised_error(low[i], exact[i]), exact[i],
                                 to_string(backend) + " " + arm.name + " " + (i == 0 ? name : "grad " + name),
                                 parity::kHalfRuleFloor, arm_param ? parity::kFlashParamFactor : 2.0);
    }
  }
}

}  // namespace attnlab::gpu
