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

/// Replaces `opt`'s state with `saved` and sets each group's lr. Throws CheckpointError naming
/// `file` when the groups' parameter names, a tensor's shape or a needed tensor differ.
void restore_adamw_state(const AdamWTensors& saved, const GPTImpl& model, torch::optim::AdamW& opt,
                         const std::filesystem::path& file);

}  // namespace attnlab::detail
