// The output gate of docs/arms.md ("The output gate"; Qiu et al. 2025, arXiv 2505.06708, G1):
//   o'_i = o_i * gamma_i,   gamma_i = sigmoid(x_i W_g + c_g).
// It acts after the attention, so every backend computes the attention as before and KV-cache
// decoding needs only the new token's own x_i.
#pragma once

#include <ATen/core/Tensor.h>

#include "attnlab/arm.h"

namespace attnlab {

/// gamma = sigmoid(x W_g + c_g): x [B, T, d_model] (ln_1's output), w [d_model, G], c [G], one dtype
/// -> [B, T, G] in x's dtype, each value in [0, 1] and finite for any argument (at::sigmoid).
/// G = H (headwise) or H * head_dim (elementwise). Throws std::invalid_argument on a shape mismatch.
at::Tensor output_gate_values(const at::Tensor& x, const at::Tensor& w, const at::Tensor& c);

/// The heads' outputs times their gates: o [B, H, T, d] (the attention's output), gamma [B, T, G]
/// as above -> [B, T, H d], the heads concatenated head-major as the output projection takes them.
/// With gate == none, gamma is ignored and the result is o concatenated. Throws
/// std::invalid_argument when G is neither H (headwise) nor H d (elementwise) as `gate` says.
at::Tensor gated_heads(const at::Tensor& o, const at::Tensor& gamma, OutputGate gate);

}  // namespace attnlab
