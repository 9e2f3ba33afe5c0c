// Fused value gate (docs/kernels.md): the norm and projection gates of SPEC section 1 computed per key read
// by one kernel (kernels/cpu/value_gate.cpp, kernels/cuda/value_gate.cu), with its own backward.
#pragma once

#include <ATen/core/Tensor.h>

#include "attnlab/gates.h"

namespace attnlab {

/// What the gate hands to attention.
struct FusedGateResult {
  at::Tensor gated_v;   ///< [B, H, T, d] g_j * v_j in v's dtype (value slot)
  at::Tensor log_gate;  ///< [B, H, T] log g_j = logsigmoid(z_j), float32 (float64 for float64 v);
                        ///< the routing bias of renorm, and exp() of it is the gate g_j
};

/// Gate of every read v [B, H, T, d] (SPEC section 1):
///   norm:       z_j = beta (||v_j|| / sqrt(d) - tau_h), beta = 8 (kNormGateBeta)
///   projection: z_j = w_h . v_j + c_h
///   g_j = sigmoid(z_j).
/// Differentiable in v, tau, w and c; equals gate_logits() + sigmoid / logsigmoid up to round-off.
/// CPU: float32 / float64 natively, float16 / bfloat16 upcast to float32. CUDA: the kernels of
/// kernels/cuda when compiled in (else std::runtime_error).
/// Throws std::invalid_argument when params.kind is none, a parameter's shape does not match v, or
/// the tensors sit on different devices.
FusedGateResult fused_value_gate(const at::Tensor& v, const GateParams& params);

}  // namespace attnlab
