#include "attnlab/arm_attention.h"

#include <spdlog/spdlog.h>

#include <mutex>
#include <set>
#include <stdexcept>
#include <tuple>

#include "attnlab/cudnn_attention.h"
#include "attnlab/device.h"
#include "attnlab/flash_attention.h"
#include "attnlab/fused_attention.h"
#include "attnlab/fused_gate.h"
#include "attnlab/gates.h"
#include "attnlab/sdpa_attention.h"

namespace attnlab {
namespace {

// CPU dtypes for which `automatic` picks flash: where the flash kernels measured faster than the
// tiled CPU twin (docs/benchmarks.md, "Flash backend (CPU)").
bool flash_preferred_on_cpu(at::ScalarType dtype) { return dtype == at::kFloat || dtype == at::kDouble; }

/// What `automatic` runs for a request, and why (the choice table of docs/kernels.md).
struct AutoChoice {
  AttentionBackend backend;
  std::string why;
};

AutoChoice automatic_choice(const AttentionRequest& r) {
  if (r.return_probs) return {AttentionBackend::reference, "the probabilities were asked for; only it forms them"};
  const auto refusal =
      flash_refusal(r.device, r.dtype, r.head_dim, r.q_len, r.k_len, r.key_mask, r.cuda_capability, r.window);
  if (refusal.empty() && r.device.is_cpu() && flash_preferred_on_cpu(r.dtype)) {
    return {AttentionBackend::flash, "measured faster than the fused CPU kernels (docs/benchmarks.md)"};
  }
  if (refusal.empty() && r.device.is_cuda()) {
    const auto record = cudnn_record(r.cuda_capability);
    const bool cudnn_serves =
        !r.window.local() &&
        cudnn_refusal(r.device, r.dtype, r.head_dim, r.q_len, r.k_len, r.key_mask, r.cuda_capability).empty();
    if (record.faster_and_correct && cudnn_serves) return {AttentionBackend::cudnn, record.why};
    return {AttentionBackend::flash, "FlashAttention-2 with the arm's exact corrections (docs/kernels.md); " + record.why};
  }
  auto why = !refusal.empty() ? "not flash: " + refusal : std::string("not flash: not measured faster for this dtype");
  // The fused CUDA kernels have no recorded GPU parity run: they run only when asked for by name
  // (attention.backend: fused), never by `automatic` (docs/kernels.md, "Selecting a backend").
  if (r.device.is_cuda()) {
    return {AttentionBackend::reference, why + "; not fused: the fused CUDA kernels are an explicit opt-in "
                                               "(attention.backend: fused) until their GPU parity run is recorded"};
  }
  return {AttentionBackend::fused, why};
}

/// Says once per kind of call (device, dtype, probabilities, key mask, decoding) and choice what
/// `automatic` runs and why, so that a run's log names the backend its attention ran on. Falling back
/// to the O(T^2) reference on CUDA is a warning.
void log_automatic_choice(const AttentionRequest& r, const AutoChoice& choice) {
  static std::mutex mutex;
  static std::set<std::tuple<int, int, bool, bool, bool, bool, int>> said;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    const bool decoding = r.q_len != r.k_len;
    if (!said.emplace(static_cast<int>(r.device.type()), static_cast<int>(r.dtype), r.return_probs, r.key_mask,
                      decoding, r.window.local(), static_cast<int>(choice.backend))
             .second) {
      return;
    }
  }
  const auto level =
      r.device.is_cuda() && choice.backend == AttentionBackend::reference ? spdlog::level::warn : spdlog::level::info;
  spdlog::log(level, "attention backend auto: {} for {} {} attention{}{}{}: {}", to_string(choice.backend),
              c10::DeviceTypeName(r.device.type(), /*lower_case=*/true), c10::toString(r.dtype),
              r.return_probs ? " with probabilities" : "", r.key_mask ? " with a key mask" : "",
              r.window.local() ? " in a window" : "", choice.why);
}

void require_plain_softmax(const ArmSpec& arm) {
  if (!backend_computes_arm(AttentionBackend::sdpa, arm)) {
    throw std::invalid_argument("attention backend 'sdpa' runs the plain causal softmax only (baseline); arm '" +
                                arm.name + "' has a sink or gate: use 'fused', 'flash' or 'reference'");
  }
}

// LibTorch's CPU flash kernel, behind the flash backend and behind at::scaled_dot_product_attention on
// CPU, takes D_i = dO_i . o_i from the half-precision o and rounds dS to the half type before
// dq = scale dS k. sum_j dS_ij should cancel (it is dlse_i); where the keys share a large component c
// it no longer does, and dq_i is off by that residue times c: 11-24x the reference backend's error in
// bfloat16 (docs/kernels.md, "Precision in bfloat16 / float16"). auto never picks it for half types;
// an explicit choice is refused rather than trained on.
void refuse_cpu_half_flash_kernel(const AttentionRequest& r, const char* backend) {
  if (!r.device.is_cpu() || (r.dtype != at::kBFloat16 && r.dtype != at::kHalf)) return;
  throw std::invalid_argument(
      std::string("attention.backend: '") + backend + "' on CPU in " + c10::toString(r.dtype) +
      " would run LibTorch's CPU flash kernel, whose dq is wrong when the keys share a large component (docs/kernels.md, "
      "\"Precision in bfloat16 / float16\"); for half types on CPU use attention.backend: auto or fused (they compute "
      "in float32), or give float32 inputs");
}

void require_flash_support(const AttentionRequest& r) {
  refuse_cpu_half_flash_kernel(r, "flash");
  const auto reason =
      flash_refusal(r.device, r.dtype, r.head_dim, r.q_len, r.k_len, r.key_mask, r.cuda_capability, r.window);
  if (!reason.empty()) {
    throw std::invalid_argument("attention backend 'flash': " + reason + "; use 'auto', 'fused' or 'reference'");
  }
}

// sdpa and cudnn have no window: a mask would move sdpa off the plain causal kernel it is the
// yardstick of, and torch 2.11's cuDNN op takes none (docs/windows.md, "Backends").
void refuse_window(const AttentionRequest& r, const char* backend) {
  if (!r.window.local()) return;
  throw std::invalid_argument(std::string("attention backend '") + backend + "' has no sliding window (model.window = " +
                              std::to_string(r.window.window) + " on this layer); use 'auto', 'fused' or 'reference'" +
                              " (docs/windows.md)");
}

void require_cudnn_support(const AttentionRequest& r) {
  const auto reason = cudnn_refusal(r.device, r.dtype, r.head_dim, r.q_len, r.k_len, r.key_mask, r.cuda_capability);
  if (!reason.empty()) {
    throw std::invalid_argument("attention backend 'cudnn': " + reason + "; use 'auto', 'flash' or 'reference'");
  }
}

void refuse_probs(bool return_probs, const char* backend) {
  if (return_probs) {
    throw std::invalid_argument(std::string("attention backend '") + backend +
                                "' never materialises the T x T probabilities; use 'reference' or 'auto' to get them");
  }
}

}  // namespace

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

AttentionRequest attention_request(const at::Tensor& q, int64_t k_len, bool return_probs,
                                   const AttentionWindow& window) {
  AttentionRequest r;
  if (window.hides_keys(k_len)) r.window = window;
  r.device = q.device(), r.dtype = q.scalar_type(), r.head_dim = q.size(-1);
  r.q_len = q.size(-2), r.k_len = k_len, r.return_probs = return_probs;
  r.cuda_capability = cuda_compute_capability(q.device());
  return r;
}

AttentionBackend resolve_backend(AttentionBackend requested, const AttentionRequest& r) {
  if (requested != AttentionBackend::automatic) return requested;
  const auto choice = automatic_choice(r);
  log_automatic_choice(r, choice);
  return choice.backend;
}

PreparedKeys prepare_keys(const ArmSpec& arm, const ArmLayerParams& params, const at::Tensor& k,
                          const at::Tensor& v, bool with_read_norms, AttentionBackend backend) {
  PreparedKeys keys;
  keys.k = k;
  keys.v_read = v;
  if (with_read_norms) keys.read_norm = read_norms(v);
  if (arm.gate == GateKind::none) return keys;

  const GateParams gate{arm.gate, params.gate_tau, params.gate_w, params.gate_c};
  const auto resolved = resolve_backend(backend, attention_request(v, v.size(2)));
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
  const auto in = arm_attention_inputs(arm, params, q, keys, window);
  const auto request = attention_request(q, in.k.size(2), return_probs, window);
  switch (resolve_backend(backend, request)) {
    case AttentionBackend::reference:
      return reference_attention(in, return_probs);
    case AttentionBackend::fused:
      refuse_probs(return_probs, "fused");
      return fused_attention(in);
    case AttentionBackend::sdpa:
      refuse_probs(return_probs, "sdpa");
      require_plain_softmax(arm);
      refuse_window(request, "sdpa");
      refuse_cpu_half_flash_kernel(request, "sdpa");
      return sdpa_attention(in);
    case AttentionBackend::flash:
      refuse_probs(return_probs, "flash");
      require_flash_support(request);
      return flash_attention(in);
    case AttentionBackend::cudnn:
      refuse_probs(return_probs, "cudnn");
      refuse_window(request, "cudnn");
      require_cudnn_support(request);
      return cudnn_attention(in);
    case AttentionBackend::automatic:
      break;  // resolve_backend never returns it
  }
  throw std::logic_error("arm_attention: unresolved attention backend");
}

}  // namespace attnlab
