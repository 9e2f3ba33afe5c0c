// One attention layer's arm-specific work around the shared form: per-key gates (computed once per
// key, so a KV cache stores gated reads) and the sink logit, then the attention call itself, on the
// backend the backend table (backend_table.h) picks and runs.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "attnlab/arm.h"
#include "attnlab/arm_params.h"
#include "attnlab/attention.h"
#include "attnlab/attention_backend.h"
#include "attnlab/backend_table.h"

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
/// positions): arm_attention_inputs() run by run_attention() (backend_table.h) on `backend`, or on
/// what `automatic` picks. Returns o [B, H, Tq, d], lse [B, H, Tq] (undefined for sdpa) and, when
/// asked, probs [B, H, Tq, Tk]. Throws std::invalid_argument when the backend's row refuses the call,
/// naming why and the backends that would serve it: probs from any backend but the reference, sdpa
/// for an arm with a sink or gate (the message names the arm), what flash_refusal() and
/// cudnn_refusal() refuse, flash or sdpa in bfloat16 / float16 on CPU (LibTorch's CPU flash kernel
/// loses dq when the keys share a large component, docs/kernels.md), and sdpa or cudnn for a `window`
/// that hides a key (docs/windows.md, "Backends").
AttentionResult arm_attention(const ArmSpec& arm, const ArmLayerParams& params, const at::Tensor& q,
                              const PreparedKeys& keys, bool return_probs = false,
                              AttentionBackend backend = AttentionBackend::reference,
                              const AttentionWindow& window = {});

}  // namespace attnlab
