// The whole model under bf16 autocast on one attention backend, held to the half-precision rule: the
// loss and every gradient against a float64 CPU reference, the reference backend under the same
// autocast on the GPU being the yardstick (the arm parameters' gradients at kFlashParamFactor). What
// the flash and cudnn GPU suites both check of a backend inside the real model.
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include "attnlab/arm.h"
#include "attnlab/device.h"
#include "attnlab/init.h"
#include "attnlab/model.h"
#include "parity/arm_runner.h"
#include "parity/parity_helpers.h"

namespace attnlab::gpu {

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
