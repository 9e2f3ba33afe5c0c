#include "checkpoint/optimizer_state.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <unordered_map>

#include <ATen/ATen.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "attnlab/checkpoint_error.h"
#include "checkpoint/state_json.h"

namespace attnlab::detail {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;
using torch::optim::SGDOptions;
using torch::optim::SGDParamState;

bool is_adamw(const torch::optim::OptimizerParamGroup& g) { return dynamic_cast<const AdamWOptions*>(&g.options()); }
bool is_momentum(const torch::optim::OptimizerParamGroup& g) { return dynamic_cast<const SGDOptions*>(&g.options()); }

std::unordered_map<const void*, std::string> names_by_impl(const GPTImpl& model) {
  std::unordered_map<const void*, std::string> names;
  for (const auto& item : model.named_parameters()) names[item.value().unsafeGetTensorImpl()] = item.key();
  return names;
}

json group_names(const torch::optim::OptimizerParamGroup& group,
                 const std::unordered_map<const void*, std::string>& names, const fs::path& file) {
  json list = json::array();
  for (const auto& p : group.params()) {
    const auto it = names.find(p.unsafeGetTensorImpl());
    if (it == names.end()) throw CheckpointError(file, "the optimizer holds a tensor that is not a model parameter");
    list.push_back(it->second);
  }
  return list;
}

json group_json(const torch::optim::OptimizerParamGroup& group, json names) {
  if (is_momentum(group)) {
    const auto& o = static_cast<const SGDOptions&>(group.options());
    return {{"params", std::move(names)}, {"lr", o.lr()},       {"momentum", o.momentum()},
            {"dampening", o.dampening()}, {"nesterov", o.nesterov()}, {"weight_decay", o.weight_decay()}};
  }
  const auto& o = static_cast<const AdamWOptions&>(group.options());
  return {{"params", std::move(names)},
          {"lr", o.lr()},
          {"betas", {std::get<0>(o.betas()), std::get<1>(o.betas())}},
          {"eps", o.eps()},
          {"weight_decay", o.weight_decay()},
          {"amsgrad", o.amsgrad()}};
}

void check_groups(const json& saved, const torch::optim::Optimizer& opt,
                  const std::unordered_map<const void*, std::string>& names, const fs::path& file) {
  if (!saved.is_array() || saved.size() != opt.param_groups().size()) {
    throw CheckpointError(file, "the checkpoint has " + std::to_string(saved.is_array() ? saved.size() : 0) +
                                    " parameter groups, the optimizer " + std::to_string(opt.param_groups().size()));
  }
  for (size_t g = 0; g < saved.size(); ++g) {
    if (!saved[g].is_object() || !saved[g].contains("params") || !saved[g].contains("lr") ||
        !saved[g]["lr"].is_number()) {
      throw CheckpointError(file, "parameter group " + std::to_string(g) + " lacks params or lr");
    }
    const double lr = saved[g]["lr"].get<double>();
    if (!std::isfinite(lr) || lr < 0) {
      throw CheckpointError(file, "parameter group " + std::to_string(g) + " has lr " + saved[g]["lr"].dump() +
                                      ", not a finite learning rate >= 0");
    }
    if (saved[g]["params"] != group_names(opt.param_groups()[g], names, file)) {
      throw CheckpointError(file, "parameter group " + std::to_string(g) +
                                      " holds other parameters than the optimizer's: " + saved[g]["params"].dump());
    }
  }
}

/// The saved tensor `key`, checked to fit `param` (same shape and dtype) and to be a moment AdamW
/// could have produced: finite, and >= 0 for a second moment.
at::Tensor saved_moment(const TensorMap& tensors, const std::string& key, const at::Tensor& param, bool second_moment,
                        const fs::path& file) {
  const auto it = tensors.find(key);
  if (it == tensors.end()) throw CheckpointError(file, "missing tensor '" + key + "'");
  const at::Tensor& t = it->second;
  if (!t.sizes().equals(param.sizes())) {
    throw CheckpointError(
        file, "tensor '" + key + "' has shape " + c10::str(t.sizes()) + ", the parameter " + c10::str(param.sizes()));
  }
  if (t.scalar_type() != param.scalar_type()) {
    throw CheckpointError(file, "tensor '" + key + "' is " + safetensors_dtype(t.scalar_type(), file) +
                                    ", the parameter " + safetensors_dtype(param.scalar_type(), file));
  }
  if (!at::isfinite(t).all().item<bool>()) throw CheckpointError(file, "tensor '" + key + "' holds NaN or infinity");
  if (second_moment && (t < 0).any().item<bool>()) {
    throw CheckpointError(file, "tensor '" + key + "' holds negative values (a second moment cannot)");
  }
  return t;
}

/// AdamW's step count t of one parameter: an I64 scalar >= 1 (its bias corrections divide by 1 - beta^t).
int64_t saved_step(const at::Tensor& t, const std::string& key, const fs::path& file) {
  if (t.scalar_type() != at::kLong || t.dim() != 0) throw CheckpointError(file, "'" + key + "' is not an I64 scalar");
  const int64_t step = t.item<int64_t>();
  if (step < 1) throw CheckpointError(file, "'" + key + "' is " + std::to_string(step) + ", not a step count >= 1");
  return step;
}

/// One parameter's saved state, checked: AdamW's (step >= 1), or a momentum buffer (step 0).
struct ParamState {
  at::Tensor param;
  int64_t step = 0;
  at::Tensor exp_avg, exp_avg_sq, max_exp_avg_sq;  // max_exp_avg_sq undefined without amsgrad
  at::Tensor momentum_buffer;                      // defined for a momentum group's parameter only
};

/// The kind of group each parameter is in, by name (the saved groups' names equal the optimizer's,
/// check_groups): true for a momentum group, and each AdamW parameter's amsgrad.
struct GroupKinds {
  std::unordered_map<std::string, bool> momentum, amsgrad;
  /// False for a parameter in no group (its state, if any, is then left over and refused).
  static bool is(const std::unordered_map<std::string, bool>& kind, const std::string& name) {
    const auto it = kind.find(name);
    return it != kind.end() && it->second;
  }
};

GroupKinds group_kinds(const json& saved_groups, const torch::optim::Optimizer& opt) {
  GroupKinds kinds;
  for (size_t g = 0; g < opt.param_groups().size(); ++g) {
    const auto& group = opt.param_groups()[g];
    const bool momentum = is_momentum(group);
    const bool amsgrad = !momentum && static_cast<const AdamWOptions&>(group.options()).amsgrad();
    for (const auto& name : saved_groups[g]["params"]) {
      kinds.momentum[name.get<std::string>()] = momentum;
      kinds.amsgrad[name.get<std::string>()] = amsgrad;
    }
  }
  return kinds;
}

/// An AdamW parameter's saved state, or nothing when it was never stepped; `used` collects its keys.
std::optional<ParamState> saved_adamw(const TensorMap& tensors, const std::string& name, const at::Tensor& param,
                                      bool amsgrad, std::set<std::string>& used, const fs::path& file) {
  const auto step = tensors.find("step." + name);
  if (step == tensors.end()) return std::nullopt;  // never stepped in the saved run
  ParamState s{param, saved_step(step->second, step->first, file)};
  s.exp_avg = saved_moment(tensors, "exp_avg." + name, param, false, file);
  s.exp_avg_sq = saved_moment(tensors, "exp_avg_sq." + name, param, true, file);
  used.insert({"step." + name, "exp_avg." + name, "exp_avg_sq." + name});
  if (tensors.count("max_exp_avg_sq." + name) || amsgrad) {
    s.max_exp_avg_sq = saved_moment(tensors, "max_exp_avg_sq." + name, param, true, file);
    used.insert("max_exp_avg_sq." + name);
  }
  return s;
}

/// A momentum group's parameter's saved buffer, or nothing (never stepped, or momentum 0).
std::optional<ParamState> saved_momentum(const TensorMap& tensors, const std::string& name, const at::Tensor& param,
                                         std::set<std::string>& used, const fs::path& file) {
  const std::string key = "momentum_buffer." + name;
  if (!tensors.count(key)) return std::nullopt;
  ParamState s{param};
  s.momentum_buffer = saved_moment(tensors, key, param, false, file);
  used.insert(key);
  return s;
}

/// A checkpoint of one optimizer never resumes under another: their states mean different things.
void check_same_optimizer(OptimizerName saved, const torch::optim::Optimizer& opt, const fs::path& file) {
  const OptimizerName here = optimizer_name(opt, file);
  if (saved == here) return;
  throw CheckpointError(file, "holds the state of optimizer " + to_string(saved) + ", but this run's optimizer is " +
                                  to_string(here) + " (optim.name): a checkpoint of " + to_string(saved) +
                                  " cannot resume under " + to_string(here));
}

/// Every parameter's saved state, checked against `model` and `opt` (check_optimizer_state's rules).
std::vector<ParamState> checked_states(const OptimizerTensors& saved, const GPTImpl& model,
                                       const torch::optim::Optimizer& opt, const fs::path& file) {
  check_same_optimizer(saved.name, opt, file);
  check_groups(saved.groups, opt, names_by_impl(model), file);
  const GroupKinds kinds = group_kinds(saved.groups, opt);
  std::set<std::string> used;
  std::vector<ParamState> states;
  for (const auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    auto s = kinds.is(kinds.momentum, name) ? saved_momentum(saved.tensors, name, item.value(), used, file)
                                            : saved_adamw(saved.tensors, name, item.value(),
                                                          kinds.is(kinds.amsgrad, name), used, file);
    if (s) states.push_back(std::move(*s));
  }
  std::vector<std::string> unused;
  for (const auto& [key, tensor] : saved.tensors)
    if (!used.count(key)) unused.push_back(key);
  if (!unused.empty()) {
    throw CheckpointError(file, std::to_string(unused.size()) +
                                    " optimizer tensors name no parameter of this model: " + quoted_names(unused));
  }
  return states;
}

/// A copy on the parameter's device (a copy, so stepping never writes into the loaded checkpoint).
at::Tensor on_device_of(const at::Tensor& saved, const at::Tensor& param) {
  return saved.to(param.options(), /*non_blocking=*/false, /*copy=*/true);
}

}  // namespace

OptimizerName optimizer_name(const torch::optim::Optimizer& opt, const fs::path& file) {
  bool adamw = false, momentum = false;
  for (const auto& group : opt.param_groups()) {
    if (!is_adamw(group) && !is_momentum(group)) throw CheckpointError(file, "an optimizer group of unknown kind");
    adamw = adamw || is_adamw(group);
    momentum = momentum || is_momentum(group);
  }
  if (momentum) return adamw ? OptimizerName::muon : OptimizerName::sgd;
  return OptimizerName::adamw;
}

OptimizerTensors optimizer_state(const GPTImpl& model, const torch::optim::Optimizer& opt, const fs::path& file) {
  const auto names = names_by_impl(model);
  OptimizerTensors out;
  out.name = optimizer_name(opt, file);
  out.groups = json::array();
  for (const auto& group : opt.param_groups()) out.groups.push_back(group_json(group, group_names(group, names, file)));
  for (const auto& item : model.named_parameters()) {
    const auto it = opt.state().find(item.value().unsafeGetTensorImpl());
    if (it == opt.state().end()) continue;  // never stepped (no gradient yet, or frozen)
    const std::string& name = item.key();
    if (const auto* m = dynamic_cast<const SGDParamState*>(it->second.get())) {
      out.tensors["momentum_buffer." + name] = m->momentum_buffer();
      continue;
    }
    const auto* s = dynamic_cast<const AdamWParamState*>(it->second.get());
    if (s == nullptr) throw CheckpointError(file, "optimizer state of '" + name + "' is neither AdamW's nor a momentum buffer");
    out.tensors["step." + name] = at::scalar_tensor(s->step(), at::kLong);
    out.tensors["exp_avg." + name] = s->exp_avg();
    out.tensors["exp_avg_sq." + name] = s->exp_avg_sq();
    if (s->max_exp_avg_sq().defined()) out.tensors["max_exp_avg_sq." + name] = s->max_exp_avg_sq();
  }
  return out;
}

void check_optimizer_state(const OptimizerTensors& saved, const GPTImpl& model, const torch::optim::Optimizer& opt,
                           const fs::path& file) {
  checked_states(saved, model, opt, file);
}

void restore_optimizer_state(const OptimizerTensors& saved, const GPTImpl& model, torch::optim::Optimizer& opt,
                             const fs::path& file) {
  // Built aside first, so a bad checkpoint leaves `opt` as it was.
  std::vector<std::pair<void*, std::unique_ptr<torch::optim::OptimizerParamState>>> states;
  for (const auto& s : checked_states(saved, model, opt, file)) {
    if (s.momentum_buffer.defined()) {
      auto state = std::make_unique<SGDParamState>();
      state->momentum_buffer(on_device_of(s.momentum_buffer, s.param));
      states.emplace_back(s.param.unsafeGetTensorImpl(), std::move(state));
      continue;
    }
    auto state = std::make_unique<AdamWParamState>();
    state->step(s.step);
    state->exp_avg(on_device_of(s.exp_avg, s.param));
    state->exp_avg_sq(on_device_of(s.exp_avg_sq, s.param));
    if (s.max_exp_avg_sq.defined()) state->max_exp_avg_sq(on_device_of(s.max_exp_avg_sq, s.param));
    states.emplace_back(s.param.unsafeGetTensorImpl(), std::move(state));
  }
  opt.state().clear();  // a parameter without saved state starts fresh, as it did in the saved run
  for (auto& [impl, state] : states) opt.state()[impl] = std::move(state);
  for (size_t g = 0; g < opt.param_groups().size(); ++g) {
    opt.param_groups()[g].options().set_lr(saved.groups[g]["lr"].get<double>());
  }
}

}  // namespace attnlab::detail
