#include "attnlab/optimizer_factory.h"

#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "attnlab/fused_adamw.h"
#include "attnlab/lr_schedule.h"
#include "attnlab/muon.h"
#include "attnlab/param_groups.h"

namespace attnlab {
namespace {

using torch::optim::AdamWOptions;
using torch::optim::OptimizerParamGroup;
using torch::optim::SGDOptions;

std::unique_ptr<AdamWOptions> adamw_options(const OptimConfig& o, double wd) {
  return std::make_unique<AdamWOptions>(AdamWOptions(o.lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(wd));
}

std::unique_ptr<SGDOptions> momentum_options(const OptimConfig& o, double lr, double wd) {
  return std::make_unique<SGDOptions>(
      SGDOptions(lr).momentum(o.effective_momentum()).nesterov(o.effective_nesterov()).weight_decay(wd));
}

// AdamW stepped by the fused kernel (fused_adamw.h): torch::optim::AdamW's state, so checkpoints and
// exact resume are unchanged; one pass per parameter instead of the per-parameter chain of ops.
BuiltOptimizer adamw(const ParamGroups& groups, const OptimConfig& o) {
  std::vector<OptimizerParamGroup> param_groups;
  param_groups.emplace_back(groups.decay, adamw_options(o, o.weight_decay));
  param_groups.emplace_back(groups.no_decay, adamw_options(o, 0.0));  // SPEC section 1: excluded from decay
  return {std::make_unique<FusedAdamW>(param_groups, AdamWOptions(o.lr)), {o.lr, o.lr}};
}

BuiltOptimizer sgd(const ParamGroups& groups, const OptimConfig& o) {
  std::vector<OptimizerParamGroup> param_groups;
  param_groups.emplace_back(groups.decay, momentum_options(o, o.lr, o.weight_decay));
  param_groups.emplace_back(groups.no_decay, momentum_options(o, o.lr, 0.0));
  return {std::make_unique<torch::optim::SGD>(param_groups, SGDOptions(o.lr)), {o.lr, o.lr}};
}

BuiltOptimizer muon(const GPTImpl& model, const ParamGroups& groups, const OptimConfig& o) {
  std::vector<at::Tensor> hidden, decay_rest;
  std::unordered_map<const void*, int64_t> blocks;
  std::set<std::string> hidden_names;
  for (const auto& m : hidden_matrices(model)) {
    hidden.push_back(m.param);
    blocks[m.param.unsafeGetTensorImpl()] = m.blocks;
    hidden_names.insert(m.name);
  }
  for (size_t i = 0; i < groups.decay.size(); ++i)
    if (!hidden_names.count(groups.decay_names[i])) decay_rest.push_back(groups.decay[i]);
  std::vector<OptimizerParamGroup> param_groups;
  param_groups.emplace_back(hidden, momentum_options(o, o.effective_muon_lr(), o.weight_decay));
  param_groups.emplace_back(decay_rest, adamw_options(o, o.weight_decay));
  param_groups.emplace_back(groups.no_decay, adamw_options(o, 0.0));
  return {std::make_unique<Muon>(param_groups, std::move(blocks)), {o.effective_muon_lr(), o.lr, o.lr}};
}

}  // namespace

BuiltOptimizer make_optimizer(GPTImpl& model, const OptimConfig& o) {
  const auto groups = parameter_groups(model);
  switch (o.optimizer()) {
    case OptimizerName::adamw: return adamw(groups, o);
    case OptimizerName::sgd: return sgd(groups, o);
    case OptimizerName::muon: return muon(model, groups, o);
  }
  throw std::logic_error("make_optimizer: an optimizer without a name");
}

void set_learning_rates(torch::optim::Optimizer& opt, const std::vector<double>& peak_lr, const OptimConfig& o,
                        int64_t step, int64_t total_steps) {
  for (size_t g = 0; g < opt.param_groups().size(); ++g) {
    OptimConfig peak = o;  // the schedule of this group's peak (for optim.lr exactly learning_rate(o, ...))
    peak.lr = peak_lr.at(g);
    opt.param_groups()[g].options().set_lr(learning_rate(peak, step, total_steps));
  }
}

}  // namespace attnlab
