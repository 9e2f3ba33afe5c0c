#include "checkpoint/adamw_state.h"

#include <unordered_map>

#include <ATen/ATen.h>

#include "attnlab/checkpoint_error.h"

namespace attnlab::detail {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;

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
  const auto& o = static_cast<const AdamWOptions&>(group.options());
  return {{"params", std::move(names)},
          {"lr", o.lr()},
          {"betas", {std::get<0>(o.betas()), std::get<1>(o.betas())}},
          {"eps", o.eps()},
          {"weight_decay", o.weight_decay()},
          {"amsgrad", o.amsgrad()}};
}

void check_groups(const json& saved, const torch::optim::AdamW& opt,
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
    if (saved[g]["params"] != group_names(opt.param_groups()[g], names, file)) {
      throw CheckpointError(file, "parameter group " + std::to_string(g) +
                                      " holds other parameters than the optimizer's: " + saved[g]["params"].dump());
    }
  }
}

/// A copy of the saved tensor `key` on the parameter's device and dtype (a copy, so stepping the
/// optimizer never writes into the loaded checkpoint).
at::Tensor moment(const TensorMap& tensors, const std::string& key, const at::Tensor& param,
                  const fs::path& file) {
  const auto it = tensors.find(key);
  if (it == tensors.end()) throw CheckpointError(file, "missing tensor '" + key + "'");
  if (!it->second.sizes().equals(param.sizes())) {
    throw CheckpointError(file, "tensor '" + key + "' has shape " + c10::str(it->second.sizes()) +
                                    ", the parameter " + c10::str(param.sizes()));
  }
  return it->second.to(param.options(), /*non_blocking=*/false, /*copy=*/true);
}

int64_t step_of(const at::Tensor& t, const std::string& key, const fs::path& file) {
  if (t.scalar_type() != at::kLong || t.numel() != 1) throw CheckpointError(file, "'" + key + "' is not an I64 scalar");
  return t.item<int64_t>();
}

}  // namespace

AdamWTensors adamw_state(const GPTImpl& model, const torch::optim::AdamW& opt, const fs::path& file) {
  const auto names = names_by_impl(model);
  AdamWTensors out;
  out.groups = json::array();
  for (const auto& group : opt.param_groups()) out.groups.push_back(group_json(group, group_names(group, names, file)));
  for (const auto& item : model.named_parameters()) {
    const auto it = opt.state().find(item.value().unsafeGetTensorImpl());
    if (it == opt.state().end()) continue;  // never stepped (no gradient yet, or frozen)
    const auto* s = dynamic_cast<const AdamWParamState*>(it->second.get());
    if (s == nullptr) throw CheckpointError(file, "optimizer state of '" + item.key() + "' is not AdamW's");
    const std::string& name = item.key();
    out.tensors["step." + name] = at::scalar_tensor(s->step(), at::kLong);
    out.tensors["exp_avg." + name] = s->exp_avg();
    out.tensors["exp_avg_sq." + name] = s->exp_avg_sq();
    if (s->max_exp_avg_sq().defined()) out.tensors["max_exp_avg_sq." + name] = s->max_exp_avg_sq();
  }
  return out;
}

void restore_adamw_state(const AdamWTensors& saved, const GPTImpl& model, torch::optim::AdamW& opt,
                         const fs::path& file) {
  const auto names = names_by_impl(model);
  check_groups(saved.groups, opt, names, file);
  size_t used = 0;
  std::unordered_map<std::string, bool> amsgrad;  // by parameter name
  for (size_t g = 0; g < opt.param_groups().size(); ++g) {
    const auto& o = static_cast<const AdamWOptions&>(opt.param_groups()[g].options());
    for (const auto& name : saved.groups[g]["params"]) amsgrad[name.get<std::string>()] = o.amsgrad();
  }
  // Built aside first, so a bad checkpoint leaves `opt` as it was.
  std::vector<std::pair<void*, std::unique_ptr<AdamWParamState>>> states;
  for (const auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    const auto step = saved.tensors.find("step." + name);
    if (step == saved.tensors.end()) continue;
    const at::Tensor& p = item.value();
    auto state = std::make_unique<AdamWParamState>();
    state->step(step_of(step->second, step->first, file));
    state->exp_avg(moment(saved.tensors, "exp_avg." + name, p, file));
    state->exp_avg_sq(moment(saved.tensors, "exp_avg_sq." + name, p, file));
    used += 3;
    if (saved.tensors.count("max_exp_avg_sq." + name) || amsgrad[name]) {
      state->max_exp_avg_sq(moment(saved.tensors, "max_exp_avg_sq." + name, p, file));
      ++used;
    }
    states.emplace_back(p.unsafeGetTensorImpl(), std::move(state));
  }
  if (used != saved.tensors.size()) {
    throw CheckpointError(file, std::to_string(saved.tensors.size() - used) +
                                    " optimizer tensors name no parameter of this model");
  }
  opt.state().clear();  // a parameter without saved state starts fresh, as it did in the saved run
  for (auto& [impl, state] : states) opt.state()[impl] = std::move(state);
  for (size_t g = 0; g < opt.param_groups().size(); ++g) {
    opt.param_groups()[g].options().set_lr(saved.groups[g]["lr"].get<double>());
  }
}

}  // namespace attnlab::detail
