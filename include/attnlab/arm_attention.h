// One attention layer's arm-specific work around the shared form: per-key gates (computed once per
// key, so a KV cache stores gated reads) and the sink logit, then the attention call itself.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "attnlab/arm.h"
#include "attnlab/arm_params.h"
#include "attnlab/attention.h"
#include "attnlab/attention_backend.h"

namespace attnlab {

/// The arm parameters of one layer; a tensor the arm does not have stays undefined.
struct ArmLayerParams {
  at::Tensor sink_logit;  ///< [H] b_h (learned sink)
  at::Tensor gate_tau;    ///< [H] tau_h (norm gate)
  at::Tensor gate_w;      ///< [H, d] w_h (projection gate)
  at::Tensor gate_c;      ///< [H] c_h (projection gate)
};

/// The member of `params` that holds `param` (arm_params.h): how a layer fills its ArmLayerParams
/// once, at construction. Throws std::logic_error for the output gate's two, which act outside the
/// attention and have no member here.
at::Tensor& arm_param_slot(ArmLayerParams& params, ArmParam param);

/// Keys after the arm's per-key work: exactly what a KV cache holds (SPEC section 1, KV cache).
struct PreparedKeys {
  at::Tensor k;             ///< [B, H, T, d]
  at::Tensor v_read;        ///< [B, H, T, d]: g_j * v_j for a value-slot gate, else v_j
  at::Tensor routing_bias;  ///< [B, H, T] r_j = log g_j for a routing-slot gate (renorm), else undefined
  at::Tensor gate;          ///< [B, H, T] g_j where the arm has a gate, else undefined
  at::Tensor read_norm;     ///< [B, H, T] ||v_j|| of the ungated read, only when asked for
};

/// What each AttentionBackend (attention_backend.h; config key `attention.backend`; the choice
/// table is in docs/kernels.md, "Selecting a backend") computes:
///  - reference: the composed ops of attention.h / gates.h; any device and dtype; the only one that
///    returns probabilities; memory O(T^2).
///  - fused: the tiled kernels (fused_attention.h, fused_gate.h); memory O(T); CPU always, CUDA when
///    the build has the kernels; never returns probabilities (asking throws).
///  - sdpa: at::scaled_dot_product_attention; only arms whose attention is the plain causal softmax
///    (backend_computes_arm); o only, lse undefined.
///  - flash: LibTorch's flash kernels with exact corrections for every arm (flash_attention.h);
///    memory O(T); the square causal case only (no KV-cache decoding, no key mask), CUDA in
///    bfloat16 / float16 only; never returns probabilities.
///  - cudnn: cuDNN's fused attention under the flash backend's composition (cudnn_attention.h); CUDA
///    in bfloat16 / float16 only, the square causal case; never returns probabilities.
///  - automatic: resolve_backend() below.

/// What one attention call asks of a backend: where it runs and what it needs.
struct AttentionRequest {
  at::Device device = at::kCPU;
  at::ScalarType dtype = at::kFloat;  ///< dtype of q, k, v
  int64_t head_dim = 64;
  int64_t q_len = 1, k_len = 1;       ///< Tq <= Tk; Tq < Tk is KV-cache decoding
  bool key_mask = false;
  bool return_probs = false;
  AttentionWindow window;             ///< the layer's window (attention_window.h); none for a global layer
  int cuda_capability = 0;            ///< 10 * major + minor of a CUDA device (device.h); 0: CPU or unknown
};

/// The backend that runs `request`. An explicit backend is returned as is (arm_attention throws if
/// it cannot serve the request). `automatic` resolves to:
///  - reference whenever probabilities are asked for;
///  - flash where flash_refusal() (flash_attention.h) has no objection: on CPU when the dtype is
///    float32 or float64 (where it measured faster than the tiled CPU twin, docs/benchmarks.md); on
///    CUDA in bfloat16 / float16 (bf16 autocast) on compute capability 8.0 or newer, unless
///    cudnn_record() (cudnn_attention.h) says a GPU run measured cuDNN faster and correct on the
///    device's compute capability, when it is cudnn;
///  - otherwise fused on CPU; on CUDA the reference: the fused CUDA kernels, unproven on a GPU,
///    run only when named (AttentionBackend::fused), never by `automatic`.
/// `automatic` logs what it runs and why once per kind of call (device, dtype, probabilities, key
/// mask, decoding, window): at info level, and as a warning when CUDA falls back to the reference.
AttentionBackend resolve_backend(AttentionBackend requested, const AttentionRequest& request);

/// The request of attention of queries q [B, H, Tq, d] over keys of length k_len (on CUDA, with the
/// device's compute capability), under `window`. A window that hides no key of the call
/// (AttentionWindow::hides_keys) is dropped: such a call is a global layer's on every backend.
AttentionRequest attention_request(const at::Tensor& q, int64_t k_len, bool return_probs = false,
                                   const AttentionWindow& window = {});

/// Gate and route the keys of one layer. k, v: [B, H, T, d]. `with_read_norms` also fills read_norm.
/// With a backend resolving to fused, the gate is the fused gate kernel (fused_gate.h); otherwise,
/// flash included, the composed gate of gates.h: it reads the model's strided v in place (the fused
/// kernel wants a contiguous copy) and its parameter gradients are LibTorch reductions, deterministic
/// on CUDA too (the fused CUDA gate sums them with atomics). The values agree up to round-off.
PreparedKeys prepare_keys(const ArmSpec& arm, const ArmLayerParams& params, const at::Tensor& k,
                          const at::Tensor& v, bool with_read_norms = false,
                          AttentionBackend backend = AttentionBackend::reference);

/// b_h as the attention call wants it: the learned [H] tensor, zeros [H] for off_by_one, or undefined.
at::Tensor effective_sink_logit(const ArmSpec& arm, const ArmLayerParams& params, int64_t n_head,
                                const at::TensorOptions& options);

/// What arm_attention hands a backend: q, the prepared keys' k, v_read and routing_bias, and
/// effective_sink_logit in the accumulator dtype (float32; float64 for float64 q), and `window` when
/// it hides a key of the call (else none, so the call is the global layer's bit for bit).
AttentionInputs arm_attention_inputs(const ArmSpec& arm, const ArmLayerParams& params, const at::Tensor& q,
                                     const PreparedKeys& keys, const AttentionWindow& window = {});

/// Causal attention of queries q [B, H, Tq, d] over prepared keys (Tk >= Tq; queries are the last Tq
/// positions). Returns o [B, H, Tq, d], lse [B, H, Tq] (undefined for sdpa) and, when asked, probs
/// [B, H, Tq, Tk]. Throws std::invalid_argument when the backend cannot serve the request: probs from
/// fused, sdpa or flash, sdpa for an arm with a sink or gate (the message names the arm), flash for
/// what flash_refusal() refuses (the message says why), and flash or sdpa in bfloat16 / float16 on
/// CPU: LibTorch's CPU flash kernel loses dq when the keys share a large component (docs/kernels.md).
/// `window` makes the call a local layer's (docs/windows.md, "Backends"): sdpa and cudnn refuse one
/// that hides a key, flash on CUDA refuses keep_first > 0; `automatic` picks flash on CPU in float32 /
/// float64 (LibTorch's CPU kernel over query chunks), as for a global layer.
AttentionResult arm_attention(const ArmSpec& arm, const ArmLayerParams& params, const at::Tensor& q,
                              const PreparedKeys& keys, bool return_probs = false,
                              AttentionBackend backend = AttentionBackend::reference,
                              const AttentionWindow& window = {});

}  // namespace attnlab
