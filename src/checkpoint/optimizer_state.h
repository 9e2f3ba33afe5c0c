// A training optimizer's per-parameter state as named tensors (optimizer.safetensors) and back into
// LibTorch's state map, which is keyed by each parameter's TensorImpl. Two kinds of parameter group
// occur (docs/checkpoints.md, "optimizer.safetensors"): AdamW's (AdamWOptions, AdamWParamState) and
// momentum groups (SGDOptions, SGDParamState: SGD's, and Muon's hidden matrices, muon.h).
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>
#include <torch/optim/optimizer.h>

#include "attnlab/model.h"
#include "attnlab/run_config.h"
#include "attnlab/safetensors.h"

namespace attnlab::detail {

struct OptimizerTensors {
  /// Which optimizer wrote them: the metadata "attnlab.optimizer", absent for adamw (so AdamW's
  /// files are what they were before other optimizers existed).
  OptimizerName name = OptimizerName::adamw;
  /// AdamW groups' parameters: "exp_avg.<name>", "exp_avg_sq.<name>" (the parameter's shape and
  /// dtype), "step.<name>" (I64 scalar), "max_exp_avg_sq.<name>" (amsgrad); momentum groups':
  /// "momentum_buffer.<name>". Only parameters the optimizer has stepped have state.
  TensorMap tensors;
  /// Per group, in order: AdamW {"params": [names], "lr", "betas": [b1, b2], "eps", "weight_decay",
  /// "amsgrad"}; momentum {"params", "lr", "momentum", "dampening", "nesterov", "weight_decay"}.
  nlohmann::json groups;
};

/// The optimizer `opt` is, read from its groups' LibTorch options: AdamW's alone = adamw, SGD's
/// alone = sgd, both = muon (its hidden matrices' group takes SGDOptions). Throws CheckpointError
/// naming `file` for another kind of group.
OptimizerName optimizer_name(const torch::optim::Optimizer& opt, const std::filesystem::path& file);

/// Throws CheckpointError naming `file` if `opt` holds a tensor that is not one of `model`'s
/// parameters or a state that is not its group's kind.
OptimizerTensors optimizer_state(const GPTImpl& model, const torch::optim::Optimizer& opt,
                                 const std::filesystem::path& file);

/// Throws the CheckpointError (naming `file`) that restore_optimizer_state would throw, changing
/// nothing: the optimizer (a checkpoint of one refuses to resume under another, naming both),
/// groups (parameter names, a finite lr >= 0), every tensor's name, shape and dtype (the
/// parameter's; I64 scalar >= 1 for a step), finite values, exp_avg_sq and max_exp_avg_sq >= 0, no
/// tensor left over (the first few are named).
void check_optimizer_state(const OptimizerTensors& saved, const GPTImpl& model, const torch::optim::Optimizer& opt,
                           const std::filesystem::path& file);

/// check_optimizer_state, then replaces `opt`'s state with `saved` and sets each group's lr.
void restore_optimizer_state(const OptimizerTensors& saved, const GPTImpl& model, torch::optim::Optimizer& opt,
                             const std::filesystem::path& file);

}  // namespace attnlab::detail
