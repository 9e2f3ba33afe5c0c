#include "attnlab/arm_params.h"

namespace attnlab {

std::vector<ArmParamSpec> attention_params(const ArmSpec& arm, int64_t n_head, int64_t head_dim) {
  std::vector<ArmParamSpec> params;
  if (arm.sink == SinkKind::learned) params.push_back({"sink_logit", {n_head}, 0.0, false});
  if (arm.gate == GateKind::norm) params.push_back({"gate_tau", {n_head}, kNormGateTauInit, false});
  if (arm.gate == GateKind::projection) {
    params.push_back({"gate_w", {n_head, head_dim}, 0.0, false});
    params.push_back({"gate_c", {n_head}, kProjGateBiasInit, false});
  }
  if (arm.out_gate != OutputGate::none) {
    const int64_t d_model = n_head * head_dim;
    const int64_t width = arm.out_gate == OutputGate::headwise ? n_head : n_head * head_dim;
    params.push_back({"out_gate_w", {d_model, width}, 0.0, false});
    params.push_back({"out_gate_c", {width}, kOutGateBiasInit, false});
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
