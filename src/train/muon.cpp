#include "attnlab/muon.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include <ATen/ATen.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include "attnlab/fused_adamw.h"

namespace attnlab {
namespace {

using torch::optim::SGDOptions;
using torch::optim::SGDParamState;

int64_t blocks_of(const std::unordered_map<const void*, int64_t>& blocks, const at::Tensor& p) {
  const auto it = blocks.find(p.unsafeGetTensorImpl());
  return it == blocks.end() ? 1 : it->second;
}

void check_matrix(const at::Tensor& p, int64_t blocks) {
  if (p.dim() != 2) throw std::invalid_argument("Muon: a matrix group holds a parameter of " + std::to_string(p.dim()) + " dimensions");
  if (blocks < 1 || p.size(0) % blocks != 0)
    throw std::invalid_argument("Muon: " + std::to_string(p.size(0)) + " rows do not split into " +
                                std::to_string(blocks) + " blocks");
}

// One Muon update of matrix `p` (muon.h's formulas), its momentum buffer created on first use.
void muon_update(at::Tensor& p, const SGDOptions& o, int64_t blocks,
                 std::unique_ptr<torch::optim::OptimizerParamState>& slot) {
  const at::Tensor& g = p.grad();
  if (g.is_sparse()) throw std::invalid_argument("Muon does not support sparse gradients");
  if (!slot) {
    auto fresh = std::make_unique<SGDParamState>();
    fresh->momentum_buffer(at::zeros_like(p, at::MemoryFormat::Preserve));
    slot = std::move(fresh);
  }
  auto& buf = static_cast<SGDParamState&>(*slot).momentum_buffer();
  const double mu = o.momentum();
  buf.lerp_(g, 1.0 - mu);
  const at::Tensor u = o.nesterov() ? g.lerp(buf, mu) : buf;
  const int64_t rows = p.size(0) / blocks, cols = p.size(1);
  const at::Tensor orth = newton_schulz(u.reshape({blocks, rows, cols})).reshape(p.sizes());
  const double scale = std::sqrt(std::max(1.0, double(rows) / double(cols)));
  p.mul_(1.0 - o.lr() * o.weight_decay());
  p.add_(orth, -o.lr() * scale);
}

}  // namespace

at::Tensor newton_schulz(const at::Tensor& g, int64_t steps) {
  if (g.dim() < 2) throw std::invalid_argument("newton_schulz: needs a matrix, got " + std::to_string(g.dim()) + " dimensions");
  const bool tall = g.size(-2) > g.size(-1);
  at::Tensor x = g.to(at::kFloat);
  if (tall) x = x.mT();
  x = x / (at::linalg_matrix_norm(x, "fro", {-2, -1}, /*keepdim=*/true) + 1e-7);
  for (int64_t i = 0; i < steps; ++i) {
    const at::Tensor a = at::matmul(x, x.mT());
    const at::Tensor b = kNewtonSchulzB * a + kNewtonSchulzC * at::matmul(a, a);
    x = kNewtonSchulzA * x + at::matmul(b, x);
  }
  if (tall) x = x.mT();
  return x.to(g.scalar_type()).contiguous();
}

Muon::Muon(const std::vector<torch::optim::OptimizerParamGroup>& groups, std::unordered_map<const void*, int64_t> blocks)
    : torch::optim::Optimizer(groups, std::make_unique<torch::optim::AdamWOptions>()), blocks_(std::move(blocks)) {
  for (const auto& group : param_groups_) {
    const auto* o = dynamic_cast<const SGDOptions*>(&group.options());
    if (o == nullptr) continue;
    if (o->dampening() != 0) throw std::invalid_argument("Muon: a matrix group with dampening");
    for (const auto& p : group.params()) check_matrix(p, blocks_of(blocks_, p));
  }
}

at::Tensor Muon::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto* o = dynamic_cast<const SGDOptions*>(&group.options());
    if (o == nullptr) {
      fused_adamw_step(group, state_);
      continue;
    }
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      muon_update(p, *o, blocks_of(blocks_, p), state_[p.unsafeGetTensorImpl()]);
    }
  }
  return loss;
}

}  // namespace attnlab
