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

}  // namespace attnlab
