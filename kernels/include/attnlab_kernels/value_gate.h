// Torch-free boundary of the fused value-gate kernels (SPEC section 1, norm gate and projection gate).
//
// Per key read v_j (a row of V, [d]) of head h:
//   norm:       z_j = beta * (||v_j|| / sqrt(d) - tau_h)
//   projection: z_j = w_h . v_j + c_h
//   g_j = sigmoid(z_j);   gated read u_j = g_j * v_j;   routing bias (renorm) r_j = log g_j = logsigmoid(z_j)
#pragma once

#include <cstdint>

#include "attnlab_kernels/flash_attention.h"

namespace attnlab::kernels {

enum class ValueGateKind : int { norm, projection };

struct ValueGateShape {
  int64_t batch = 0, heads = 0, len = 0, head_dim = 0;
  ValueGateKind kind = ValueGateKind::norm;
  double beta = 8.0;         ///< norm gate sharpness (SPEC: 8, fixed)
  DType dtype = DType::f32;  ///< of v, gated_v, d_gated_v, d_v
};

/// Tensors are contiguous: v [B, H, T, d]; parameters are acc type (float; double for f64).
struct ValueGateForwardArgs {
  const void* v = nullptr;    ///< [B, H, T, d]
  const void* tau = nullptr;  ///< [H], norm gate
  const void* w = nullptr;    ///< [H, d], projection gate
  const void* c = nullptr;    ///< [H], projection gate
  void* gated_v = nullptr;    ///< [B, H, T, d] out: g_j v_j (skipped when null)
  void* log_gate = nullptr;   ///< [B, H, T] acc type out: logsigmoid(z_j) (skipped when null)
};

/// Backward of ValueGateForwardArgs' outputs. Either upstream gradient may be null (that output was
/// not used). d_v receives only the gradient that flows through the gate's outputs (overwritten);
/// the caller adds any other use of v. Parameter gradients are overwritten, summed over batch and time.
struct ValueGateBackwardArgs {
  ValueGateForwardArgs fwd;          ///< v and the parameters (outputs unused)
  const void* d_gated_v = nullptr;   ///< [B, H, T, d]
  const void* d_log_gate = nullptr;  ///< [B, H, T] acc type
  void* d_v = nullptr;               ///< [B, H, T, d]
  void* d_tau = nullptr;             ///< [H] acc type, norm gate (skipped when null)
  void* d_w = nullptr;               ///< [H, d] acc type, projection gate (skipped when null)
  void* d_c = nullptr;               ///< [H] acc type, projection gate (skipped when null)
};

}  // namespace attnlab::kernels
