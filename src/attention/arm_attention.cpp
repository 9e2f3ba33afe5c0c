#include "attnlab/arm_attention.h"

#include <spdlog/spdlog.h>

#include <mutex>
#include <stdexcept>

#include "attnlab/fused_attention.h"
#include "attnlab/fused_gate.h"
#include "attnlab/gates.h"
#include "attnlab/sdpa_attention.h"

namespace attnlab {
namespace {

// Issue 5: `automatic` may pick the fused CUDA kernels only once a GPU parity run is recorded in
// docs/benchmarks.md. Flip this in the same commit that records it.
constexpr bool kFusedCudaParityRecorded = false;

void log_cuda_fallback_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    spdlog::warn("attention backend auto: using the reference on CUDA; the fused CUDA kernels await a recorded GPU "
                 "parity run (docs/benchmarks.md)");
  });
}

void require_plain_softmax(const ArmSpec& arm) {
  if (arm.sink != SinkKind::none || arm.gate != GateKind::none) {
    throw std::invalid_argument("attention backend 'sdpa' runs the plain causal softmax only (baseline); arm '" +
                                arm.name + "' has a sink or gate: use 'fused' or 'reference'");
  }
}

void refuse_probs(bool return_probs, const char* backend) {
  if (return_probs) {
    throw std::invalid_argument(std::string("attention backend '") + backend +
                                "' never materialises the T x T probabilities; use 'reference' or 'auto' to get them");
  }
}

}  // namespace

AttentionBackend parse_attention_backend(const std::string& name) {
  if (name == "auto") return AttentionBackend::automatic;
  if (name == "fused") return AttentionBackend::fused;
  if (name == "reference") return AttentionBackend::reference;
  if (name == "sdpa") return AttentionBackend::sdpa;
  throw std::invalid_argument("unknown attention backend '" + name + "'; valid: auto, fused, reference, sdpa");
}

std::string to_string(AttentionBackend backend) {
  switch (backend) {
    case AttentionBackend::automatic: return "auto";
    case AttentionBackend::fused: return "fused";
    case AttentionBackend::reference: return "reference";
    case AttentionBackend::sdpa: return "sdpa";
  }
  return "?";
}

AttentionBackend resolve_backend(AttentionBackend requested, const at::Device& device, bool return_probs) {
  if (requested != AttentionBackend::automatic) return requested;
  if (return_probs) return AttentionBackend::reference;
  if (device.is_cuda() && !(kFusedCudaParityRecorded && fused_cuda_compiled())) {
    log_cuda_fallback_once();
    return AttentionBackend::reference;
  }
  return AttentionBackend::fused;
}

PreparedKeys prepare_keys(const ArmSpec& arm, const ArmLayerParams& params, const at::Tensor& k,
                          const at::Tensor& v, bool with_read_norms, AttentionBackend backend) {
  PreparedKeys keys;
  keys.k = k;
  keys.v_read = v;
  if (with_read_norms) keys.read_norm = read_norms(v);
  if (arm.gate == GateKind::none) return keys;

  const GateParams gate{arm.gate, params.gate_tau, params.gate_w, params.gate_c};
  if (resolve_backend(backend, v.device()) == AttentionBackend::fused) {
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

AttentionResult arm_attention(const ArmSpec& arm, const ArmLayerParams& params, const at::Tensor& q,
                              const PreparedKeys& keys, bool return_probs, AttentionBackend backend) {
  AttentionInputs in;
  in.q = q;
  in.k = keys.k;
  in.v = keys.v_read;
  in.routing_bias = keys.routing_bias;
  in.sink_logit = effective_sink_logit(arm, params, q.size(1),
                                       q.options().dtype(q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat));
  switch (resolve_backend(backend, q.device(), return_probs)) {
    case AttentionBackend::reference:
      return reference_attention(in, return_probs);
    case AttentionBackend::fused:
      refuse_probs(return_probs, "fused");
      return fused_attention(in);
    case AttentionBackend::sdpa:
      refuse_probs(return_probs, "sdpa");
      require_plain_softmax(arm);
      return sdpa_attention(in);
    case AttentionBackend::automatic:
      break;  // resolve_backend never returns it
  }
  throw std::logic_error("arm_attention: unresolved attention backend");
}

}  // namespace attnlab
