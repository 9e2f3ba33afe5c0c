// The shared attention form of SPEC section 1 and its composed-op reference implementation:
// the oracle every fused kernel is checked against.
#pragma once

#include <ATen/core/Tensor.h>

#include "attnlab/attention_window.h"

namespace attnlab {

/// Inputs of one causal attention call. Queries are the last Tq of Tk positions: query i (0-based,
/// of Tq) sits at absolute position Tk - Tq + i and sees keys j <= Tk - Tq + i (decode: Tq = 1).
struct AttentionInputs {
  at::Tensor q;             ///< [B, H, Tq, d]
  at::Tensor k;             ///< [B, H, Tk, d]
  at::Tensor v;             ///< [B, H, Tk, d], the value reads already gated (g_j * v_j)
  at::Tensor routing_bias;  ///< optional [B, H, Tk]: r_j added to every logit of key j (renorm)
  at::Tensor sink_logit;    ///< optional [H]: b_h of the phantom key (zeros for off_by_one)
  at::Tensor key_mask;      ///< optional [B, Tk] bool: false removes key j for every query
  double scale = 0.0;       ///< logit scale; 0 means 1/sqrt(d)
  AttentionWindow window;   ///< a local layer's window over the key positions (docs/windows.md); none by default
};

/// Result of one attention call.
struct AttentionResult {
  at::Tensor o;      ///< [B, H, Tq, d], dtype of q
  at::Tensor lse;    ///< [B, H, Tq] float32 (float64 for float64 inputs), nats, log of the whole
                     ///< denominator including the sink term; -inf for a row with no key and no sink
  at::Tensor probs;  ///< [B, H, Tq, Tk] a_ij (same dtype as lse), only when asked for; masked = 0
};

/// The accumulator dtype of attention over inputs of dtype `type`: float64 for float64, float32 for
/// every other (float32, bfloat16, float16). lse, the sink logit, the routing bias, the softmax and the
/// gate parameters are held in it by every backend.
at::ScalarType attention_acc_dtype(at::ScalarType type);

/// Which keys each query sees: [Tq, Tk] bool on `device`, true where query row i (at position
/// Tk - Tq + i) sees key j under causality and `window` (attention_window.h; docs/windows.md).
at::Tensor visible_keys(int64_t q_len, int64_t k_len, const AttentionWindow& window, const at::Device& device);

/// Composed-op reference of SPEC section 1:
///   a_ij = exp(s_ij + r_j - lse_i),  lse_i = log( [sink] exp(b_h) + sum_{j visible} exp(s_ij + r_j) ),
///   s_ij = scale * q_i . k_j,        o_i = sum_j a_ij v_j.
/// "Visible" is visible_keys() of in.window and in.key_mask. Works on CPU and CUDA, any floating dtype (softmax in float32, or float64 for float64 inputs);
/// differentiable by autograd in every input. The sink term takes part in the row maximum, so
/// b_h = +-100 and rows whose keys are all masked give finite results (o = 0, lse = b_h).
/// Throws std::invalid_argument on mismatched shapes (message names the tensor).
AttentionResult reference_attention(const AttentionInputs& in, bool return_probs = false);

/// Phantom mass p_i = exp(b_h - lse_i) (SPEC section 1): lse [B, H, Tq], sink_logit [H] -> [B, H, Tq].
/// With p_i + sum_j a_ij = 1. A row with lse = -inf (no key, no sink) cannot occur when a sink exists.
at::Tensor phantom_mass(const at::Tensor& lse, const at::Tensor& sink_logit);

/// Throws std::invalid_argument naming the first tensor of `in` whose shape or dtype is inconsistent.
void check_attention_inputs(const AttentionInputs& in);

}  // namespace attnlab
