// Rotary position embeddings (Su et al. 2021, RoFormer) in GPT-NeoX's partial form: only the first
// rotary_dims channels of each head's query and key rotate (docs/interop.md states the formula).
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace attnlab {

/// x [B, H, T, d] (float32, bf16, f16 or float64) -> the same shape and dtype. With r = rotary_dims,
/// theta_i = base^(-2i / r) and p = first_position + t, channels i < r/2 and i + r/2 of position t turn
/// by the angle p * theta_i:
///   y_i       = x_i cos(p theta_i) - x_{i+r/2} sin(p theta_i)
///   y_{i+r/2} = x_{i+r/2} cos(p theta_i) + x_i sin(p theta_i),
/// channels >= r pass unchanged. The angles are computed in float32 as transformers' GPT-NeoX does
/// (float64 for a float64 x), so imported models match it to round-off. first_position is the
/// sequence index of x's first row: it continues after the cached keys when decoding.
/// Throws std::invalid_argument for a non-4-D x, an odd r, or r outside [2, d].
at::Tensor apply_rotary(const at::Tensor& x, int64_t first_position, int64_t rotary_dims, double base);

}  // namespace attnlab
