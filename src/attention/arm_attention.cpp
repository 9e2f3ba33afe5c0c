// One attention layer's arm-specific math (arm_attention.h): the per-key gates, the sink logit, and
// the inputs of the shared form handed to the backend table (backend_table.h), which picks and runs
// the backend.
#include "attnlab/arm_attention.h"

#include <stdexcept>

#include "attnlab/fused_gate.h"
#include "attnlab/gates.h"

namespace attnlab {

at::Tensor& arm_param_slot(ArmLayerParams& params, ArmParam param) {
  switch (param) {
    case ArmParam::sink_logit: return params.sink_logit;
    case ArmParam::gate_tau: return params.gate_tau;
    case ArmParam::gate_w: return params.gate_w;
    case ArmParam::gate_c: return params.gate_c;
    case ArmParam::out_gate_w:
    case ArmParam::out_gate_c: break;
  }
  throw std::logic_error("arm_param_slot: " + to_string(param) + " is no parameter of the attention call");
}

PreparedKeys prepare_keys(const ArmSpec& arm, const ArmLayerParams& params, const at::Tensor& k,
                          const at::Tensor& v, bool with_read_norms, AttentionBackend backend) {
  PreparedKeys keys;
  keys.k = k;
  keys.v_read = v;
  if (with_read_norms) keys.read_norm = read_norms(v);
  if (arm.gate == GateKind::none) return keys;

  const GateParams gate{arm.gate, params.gate_tau, params.gate_w, params.gate_c};
  const auto resolved = resolve_backend(backend, attention_request(v, v.size(2)), arm);
  if (resolved == AttentionBackend::fused) {
    auto fused = fused_value_gate(v, gate);
    keys.gate = at::exp(fused.log_gate);  // (B, H, T)
    if (arm.slot == GateSlot::value) {
      keys.v_read = fused.gated_v;
    } else {
      keys.routing_bias = fused.log_gate;
    }
    return keys;
  }
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

AttentionInputs arm_attention_inputs(const ArmSpec& arm, const ArmLayerParams& params, const at::Tensor& q,
                                     const PreparedKeys& keys, const AttentionWindow& window) {
  AttentionInputs in;
  if (window.hides_keys(keys.k.size(2))) in.window = window;
  in.q = q;
  in.k = keys.k;
  in.v = keys.v_read;
  in.routing_bias = keys.routing_bias;
  in.sink_logit = effective_sink_logit(arm, params, q.size(1),
                                       q.options().dtype(attention_acc_dtype(q.scalar_type())));
  return in;
}

AttentionResult arm_attention(const ArmSpec& arm, const ArmLayerParams& params, const at::Tensor& q,
                              const PreparedKeys& keys, bool return_probs, AttentionBackend backend,
                              const AttentionWindow& window) {
  return run_attention(backend, arm, arm_attention_inputs(arm, params, q, keys, window), return_probs);
}

}  // namespace attnlab
