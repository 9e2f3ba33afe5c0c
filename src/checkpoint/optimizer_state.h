// AdamW's per-parameter state as named tensors (optimizer.safetensors) and back into LibTorch's
// state map, which is keyed by each parameter's TensorImpl.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>
#include <torch/optim/adamw.h>

#include "attnlab/model.h"
#include "attnlab/safetensors.h"

namespace attnlab::detail {

struct AdamWTensors {
  /// "exp_avg.<name>", "exp_avg_sq.<name>" (the parameter's shape and dtype), "step.<name>" (I64
  /// scalar), "max_exp_avg_sq.<name>" (amsgrad); only parameters AdamW has stepped have state.
  TensorMap tensors;
  /// Per group, in order: {"params": [names], "lr", "betas": [b1, b2], "eps", "weight_decay", "amsgrad"}.
  nlohmann::json groups;
};

/// Throws CheckpointError naming `file` if `opt` holds a tensor that is not one of `model`'s
/// parameters or a state that is not AdamW's.
AdamWTensors adamw_state(const GPTImpl& model, const torch::optim::AdamW& opt,
                         const std::filesystem::path& file);

/// Throws the CheckpointError (naming `file`) that restore_adamw_state would throw, changing
/// nothing: groups (parameter names, a finite lr >= 0), every tensor's name, shape and dtype (the
/// parameter's; I64 scalar >= 1 for a step), finite moments, exp_avg_sq and max_exp_avg_sq >= 0,
/// no tensor left over (the first few are named).
void check_adamw_state(const AdamWTensors& saved, const GPTImpl& model, const torch::optim::AdamW& opt,
                       const std::filesystem::path& file);

/// check_adamw_state, then replaces `opt`'s state with `saved` and sets each group's lr.
void restore_adamw_state(const AdamWTensors& saved, const GPTImpl& model, torch::optim::AdamW& opt,
                         const std::filesystem::path& file);

}  // namespace attnlab::detail
