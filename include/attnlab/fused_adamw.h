// AdamW whose step is LibTorch's fused multi-tensor kernel (at::_fused_adamw_: one pass over each
// parameter's memory instead of the per-parameter chain of nine ops) over exactly the state of
// torch::optim::AdamW: the same AdamWParamState per parameter (step, exp_avg, exp_avg_sq,
// max_exp_avg_sq), so checkpoints (src/checkpoint/optimizer_state.cpp) and exact resume are unchanged.
#pragma once

#include <torch/optim/adamw.h>

namespace attnlab {

/// The per-parameter state map of a torch::optim::Optimizer (keyed by each parameter's TensorImpl).
using OptimizerStateMap = ska::flat_hash_map<void*, std::unique_ptr<torch::optim::OptimizerParamState>>;

/// FusedAdamW's update (below) of one group whose options are AdamWOptions, creating each
/// parameter's AdamWParamState in `state` as torch::optim::AdamW does; parameters without a
/// gradient are skipped. Muon's AdamW part (muon.h) steps its groups with it.
void fused_adamw_step(torch::optim::OptimizerParamGroup& group, OptimizerStateMap& state);

/// torch::optim::AdamW with step() replaced. The update is AdamW's (decoupled weight decay):
///   p <- p (1 - lr lambda);  m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2;
///   p <- p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps),
/// computed per element in float (double for float64 parameters) by the fused kernel; it rounds
/// differently from the loop (m is updated as a lerp), so after one step parameters differ from
/// torch::optim::AdamW's by about one float32 ulp (measured in tests/parity/test_fused_adamw.cpp).
/// Parameters of one group are stepped together per (device, dtype). Sparse gradients are refused
/// (std::invalid_argument), as by torch::optim::AdamW.
class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  at::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace attnlab
