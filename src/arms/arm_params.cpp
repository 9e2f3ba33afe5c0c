#include "attnlab/arm_params.h"

#include <utility>

namespace attnlab {

namespace {

ArmParamSpec spec(ArmParam param, std::vector<int64_t> shape, double init_value) {
  return {param, to_string(param), std::move(shape), init_value, false};  // no arm parameter decays
}

}  // namespace

template <>
const NameTable<ArmParam>& name_table<ArmParam>() {
  static const NameTable<ArmParam> table(
      "arm parameter", {{ArmParam::sink_logit, "sink_logit"}, {ArmParam::gate_tau, "gate_tau"},
                        {ArmParam::gate_w, "gate_w"}, {ArmParam::gate_c, "gate_c"},
                        {ArmParam::out_gate_w, "out_gate_w"}, {ArmParam::out_gate_c, "out_gate_c"}});
  return table;
}

std::string to_string(ArmParam param) { return name_table<ArmParam>().name(param); }

std::vector<ArmParamSpec> attention_params(const ArmSpec& arm, int64_t n_head, int64_t head_dim) {
  std::vector<ArmParamSpec> params;
  if (arm.sink == SinkKind::learned) params.push_back(spec(ArmParam::sink_logit, {n_head}, 0.0));
  if (arm.gate == GateKind::norm) params.push_back(spec(ArmParam::gate_tau, {n_head}, kNormGateTauInit));
  if (arm.gate == GateKind::projection) {
    params.push_back(spec(ArmParam::gate_w, {n_head, head_dim}, 0.0));
    params.push_back(spec(ArmParam::gate_c, {n_head}, kProjGateBiasInit));
  }
  if (arm.out_gate != OutputGate::none) {
    const int64_t d_model = n_head * head_dim;
    const int64_t width = arm.out_gate == OutputGate::headwise ? n_head : n_head * head_dim;
    params.push_back(spec(ArmParam::out_gate_w, {d_model, width}, 0.0));
    params.push_back(spec(ArmParam::out_gate_c, {width}, kOutGateBiasInit));
  }
  return params;
}

int64_t arm_extra_params(const ArmSpec& arm, int64_t n_layer, int64_t n_head, int64_t head_dim,
                         int64_t d_model) {
  int64_t per_layer = 0;
  for (const auto& p : attention_params(arm, n_head, head_dim)) {
    int64_t n = 1;
    for (int64_t s : p.shape) n *= s;
    per_layer += n;
  }
  return per_layer * n_layer + (arm.sink_token ? d_model : 0);
}

}  // namespace attnlab
