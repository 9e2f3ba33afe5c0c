#include "attnlab/fused_adamw.h"

#include <ATen/ops/_fused_adamw.h>

#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

namespace attnlab {
namespace {

using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;

/// One fused call's operands: parameters of one device and dtype.
struct Batch {
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
};

}  // namespace

void fused_adamw_step(torch::optim::OptimizerParamGroup& group, OptimizerStateMap& state) {
  const auto& o = static_cast<const AdamWOptions&>(group.options());
  std::map<std::pair<std::string, at::ScalarType>, Batch> batches;
  for (auto& p : group.params()) {
    if (!p.grad().defined()) continue;
    if (p.grad().is_sparse()) throw std::invalid_argument("FusedAdamW does not support sparse gradients");
    auto& slot = state[p.unsafeGetTensorImpl()];
    if (!slot) {  // torch::optim::AdamW's initial state
      auto fresh = std::make_unique<AdamWParamState>();
      fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
      fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
      if (o.amsgrad()) fresh->max_exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
      slot = std::move(fresh);
    }
    auto& s = static_cast<AdamWParamState&>(*slot);
    s.step(s.step() + 1);
    auto& b = batches[{p.device().str(), p.scalar_type()}];
    b.params.push_back(p);
    b.grads.push_back(p.grad());
    b.exp_avgs.push_back(s.exp_avg());
    b.exp_avg_sqs.push_back(s.exp_avg_sq());
    if (o.amsgrad()) b.max_exp_avg_sqs.push_back(s.max_exp_avg_sq());
    // The kernel reads t from a float tensor (exact below 2^24 steps).
    b.steps.push_back(at::full({}, static_cast<double>(s.step()), p.options().dtype(at::kFloat)));
  }
  const auto [beta1, beta2] = o.betas();
  for (auto& [key, b] : batches) {
    at::_fused_adamw_(b.params, b.grads, b.exp_avgs, b.exp_avg_sqs, b.max_exp_avg_sqs, b.steps, o.lr(), beta1, beta2,
                      o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false);
  }
}

at::Tensor FusedAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) fused_adamw_step(group, state_);
  return loss;
}

}  // namespace attnlab
