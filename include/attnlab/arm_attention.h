// One attention layer's arm-specific work around the shared form: per-key gates (computed once per
// key, so a KV cache stores gated reads) and the sink logit, then the attention call itself.
#pragma once

#include <ATen/core/Tensor.h>

#include "attnlab/arm.h"
#include "attnlab/attention.h"

namespace attnlab {

/// The arm parameters of one layer; a tensor the arm does not have stays undefined.
struct ArmLayerParams {
  at::Tensor sink_logit;  ///< [H] b_h (learned sink)
  at::Tensor gate_tau;    ///< [H] tau_h (norm gate)
  at::Tensor gate_w;      ///< [H, d] w_h (projection gate)
  at::Tensor gate_c;      ///< [H] c_h (projection gate)
};

/// Keys after the arm's per-key work: exactly what a KV cache holds (SPEC section 1, KV cache).
struct PreparedKeys {
  at::Tensor k;             ///< [B, H, T, d]
  at::Tensor v_read;        ///< [B, H, T, d]: g_j * v_j for a value-slot gate, else v_j
  at::Tensor routing_bias;  ///< [B, H, T] r_j = log g_j for a routing-slot gate (renorm), else undefined
  at::Tensor gate;          ///< [B, H, T] g_j where the arm has a gate, else undefined
  at::Tensor read_norm;     ///< [B, H, T] ||v_j|| of the ungated read, only when asked for
};

/// Which implementation computes the shared form. Only `reference` exists in the foundation; the
/// fused kernels of kernels/ plug in here.
enum class AttentionBackend { reference, fused, sdpa, automatic };

/// Gate and route the keys of one layer. k, v: [B, H, T, d]. `with_read_norms` also fills read_norm.
PreparedKeys prepare_keys(const ArmSpec& arm, const ArmLayerParams& params, const at::Tensor& k,
                          const at::Tensor& v, bool with_read_norms = false);

/// b_h as the attention call wants it: the learned [H] tensor, zeros [H] for off_by_one, or undefined.
at::Tensor effective_sink_logit(const ArmSpec& arm, const ArmLayerParams& params, int64_t n_head,
                                const at::TensorOptions& options);

/// Causal attention of queries q [B, H, Tq, d] over prepared keys (Tk >= Tq; queries are the last Tq
/// positions). Returns o [B, H, Tq, d], lse [B, H, Tq] and, when asked, probs [B, H, Tq, Tk].
AttentionResult arm_attention(const ArmSpec& arm, const ArmLayerParams& params, const at::Tensor& q,
                              const PreparedKeys& keys, bool return_probs = false,
                              AttentionBackend backend = AttentionBackend::reference);

}  // namespace attnlab
