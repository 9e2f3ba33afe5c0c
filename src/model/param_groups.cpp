#include "attnlab/param_groups.h"

#include "attnlab/model.h"

namespace attnlab {

ParamGroups parameter_groups(const GPTImpl& model) {
  ParamGroups groups;
  for (const auto& item : model.named_parameters()) {
    if (model.decays(item.key())) {
      groups.decay_names.push_back(item.key());
      groups.decay.push_back(item.value());
    } else {
      groups.no_decay_names.push_back(item.key());
      groups.no_decay.push_back(item.value());
    }
  }
  return groups;
}

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::vector<HiddenMatrix> hidden_matrices(const GPTImpl& model) {
  std::vector<HiddenMatrix> out;
  for (const auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    if (name.rfind("h.", 0) != 0) continue;  // only the blocks' matrices
    if (ends_with(name, ".attn.c_attn.weight")) {
      out.push_back({name, item.value(), 3});
    } else if (ends_with(name, ".attn.c_proj.weight") || ends_with(name, ".mlp.c_fc.weight") ||
               ends_with(name, ".mlp.c_proj.weight")) {
      out.push_back({name, item.value(), 1});
    }
  }
  return out;
}

}  // namespace attnlab
