#include "attnlab/arm_attention.h"

#include <stdexcept>

#include "attnlab/gates.h"

namespace attnlab {

PreparedKeys prepare_keys(const ArmSpec& arm, const ArmLayerParams& params, const at::Tensor& k,
                          const at::Tensor& v, bool with_read_norms) {
  PreparedKeys keys;
  keys.k = k;
  keys.v_read = v;
  if (with_read_norms) keys.read_norm = read_norms(v);
  if (arm.gate == GateKind::none) return keys;

  const GateParams gate{arm.gate, params.gate_tau, params.gate_w, params.gate_c};
  auto z = gate_logits(v, gate);  // (B, H, T)
  keys.gate = at::sigmoid(z);
  if (arm.slot == GateSlot::value) {
    keys.v_read = (v * keys.gate.unsqueeze(-1)).to(v.scalar_type());
  } else {
    keys.routing_bias = at::log_sigmoid(z);  // log g_j, finite for any z
  }
  return keys;
}

at::Tensor effective_sink_logit(const ArmSpec& arm, const ArmLayerParams& params, int64_t n_head,
                                const at::TensorOptions& options) {
  switch (arm.sink) {
    case SinkKind::learned: return params.sink_logit;
    case SinkKind::fixed_zero: return at::zeros({n_head}, options);
    case SinkKind::none: return at::Tensor();
  }
  return at::Tensor();
}

AttentionResult arm_attention(const ArmSpec& arm, const ArmLayerParams& params, const at::Tensor& q,
                              const PreparedKeys& keys, bool return_probs, AttentionBackend backend) {
  AttentionInputs in;
  in.q = q;
  in.k = keys.k;
  in.v = keys.v_read;
  in.routing_bias = keys.routing_bias;
  in.sink_logit = effective_sink_logit(arm, params, q.size(1),
                                       q.options().dtype(q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat));
  switch (backend) {
    case AttentionBackend::reference:
    case AttentionBackend::automatic:
      return reference_attention(in, return_probs);
    case AttentionBackend::fused:
    case AttentionBackend::sdpa:
      break;
  }
  throw std::invalid_argument("attention backend not available in this build");
}

}  // namespace attnlab
