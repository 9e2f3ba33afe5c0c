// Per-key value gates of SPEC section 1 (norm gate, projection gate), as composed LibTorch ops.
#pragma once

#include <ATen/core/Tensor.h>

#include "attnlab/arm.h"

namespace attnlab {

/// The learned parameters of one layer's gate. Tensors not used by `kind` stay undefined.
struct GateParams {
  GateKind kind = GateKind::none;
  at::Tensor tau;  ///< [H], norm gate threshold tau_h
  at::Tensor w;    ///< [H, d], projection gate direction w_h
  at::Tensor c;    ///< [H], projection gate bias c_h
};

/// Gate pre-activation z_j with g_j = sigmoid(z_j), per key.
///   norm:       z_j = beta * (||v_j|| / sqrt(d) - tau_h),  beta = kNormGateBeta   (SPEC section 1)
///   projection: z_j = w_h . v_j + c_h                                             (SPEC section 1)
/// v: [B, H, T, d], any floating dtype; returns [B, H, T] in float32 (float64 for float64 v).
/// The routing bias of renorm is log g_j = logsigmoid(z_j), finite for any z.
/// Throws std::invalid_argument when kind is none or a parameter's shape does not match v.
at::Tensor gate_logits(const at::Tensor& v, const GateParams& params);

/// Euclidean norm of every value read, ||v_j||: v [B, H, T, d] -> [B, H, T] (float32 or float64).
at::Tensor read_norms(const at::Tensor& v);

}  // namespace attnlab
