// The optimizer a run trains with (optim.name): built on the model's parameter
// groups, with each group's peak learning rate, which the schedule multiplies.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/optim/optimizer.h>

#include "attnlab/model.h"
#include "attnlab/run_config.h"

namespace attnlab {

struct BuiltOptimizer {
  std::unique_ptr<torch::optim::Optimizer> opt;
  std::vector<double> peak_lr;  ///< per group, in the optimizer's order
};

/// Groups, in order (docs/design.md, "The trainer"):
/// - adamw: FusedAdamW on decay (optim.weight_decay) and no_decay (0), at optim.lr;
/// - sgd: torch::optim::SGD (coupled L2 decay: g + lambda p enters the momentum) on the same two
///   groups, at optim.lr, momentum and Nesterov as configured;
/// - muon: Muon's hidden matrices (hidden_matrices(), param_groups.h) at optim.muon_lr with
///   decoupled decay optim.weight_decay, then AdamW on the other decayed parameters and on no_decay,
///   at optim.lr.
BuiltOptimizer make_optimizer(GPTImpl& model, const OptimConfig& o);

/// Sets each group's learning rate to the schedule of step `step` (0-based) of `total_steps`
/// (lr_schedule.h) with the group's peak: warm-up and cosine multiply every group alike.
void set_learning_rates(torch::optim::Optimizer& opt, const std::vector<double>& peak_lr, const OptimConfig& o,
                        int64_t step, int64_t total_steps);

}  // namespace attnlab
