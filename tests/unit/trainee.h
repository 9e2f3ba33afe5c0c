// A tiny model with its AdamW on the decay / no_decay groups, as the trainer builds them: what the
// checkpoint tests and the checkpoint fuzz driver save, damage and restore.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "attnlab/init.h"
#include "attnlab/model.h"
#include "attnlab/param_groups.h"
#include "attnlab/run_config.h"

namespace attnlab::testing {

/// One layer, d_model 32, 2 heads, a 64-token vocabulary, block_size 16.
inline ModelConfig tiny_config(const std::string& arm = "baseline") {
  ModelConfig cfg;
  cfg.arm = arm;
  cfg.n_layer = 1;
  cfg.d_model = 32;
  cfg.n_head = 2;
  cfg.vocab_size = 64;
  cfg.block_size = 16;
  return cfg;
}

/// A run config of tiny_config(arm) that passes validate(): what a checkpoint's state.json records.
inline RunConfig tiny_run_config(const std::string& arm = "baseline") {
  RunConfig cfg;
  cfg.model = tiny_config(arm);
  cfg.data.train = "data/tiny_train_*.bin";
  cfg.data.val = "data/tiny_val_*.bin";
  cfg.train.batch_size = 2;
  cfg.train.seq_len = 16;
  cfg.train.max_steps = 10;
  return cfg;
}

struct Trainee {
  GPT model;
  std::unique_ptr<torch::optim::AdamW> opt;

  Trainee(const ModelConfig& cfg, uint64_t seed) : model(cfg) {
    init_parameters(*model, seed);
    const ParamGroups groups = parameter_groups(*model);
    auto options = [](double wd) {
      return std::make_unique<torch::optim::AdamWOptions>(
          torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(wd));
    };
    std::vector<torch::optim::OptimizerParamGroup> param_groups;
    param_groups.emplace_back(groups.decay, options(0.1));
    param_groups.emplace_back(groups.no_decay, options(0.0));
    opt = std::make_unique<torch::optim::AdamW>(param_groups, torch::optim::AdamWOptions(1e-2));
  }

  /// One step on a batch drawn from the global CPU generator, so resuming must restore it too.
  void step() {
    const auto idx = torch::randint(0, 64, {2, 16}, torch::kLong);
    const auto targets = torch::randint(0, 64, {2, 16}, torch::kLong);
    opt->zero_grad();
    lm_loss(model->forward(idx), targets).backward();
    opt->step();
  }
};

}  // namespace attnlab::testing
