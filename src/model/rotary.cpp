#include "attnlab/rotary.h"

#include <stdexcept>
#include <string>

#include <ATen/ATen.h>

namespace attnlab {

at::Tensor apply_rotary(const at::Tensor& x, int64_t first_position, int64_t rotary_dims, double base) {
  if (x.dim() != 4) throw std::invalid_argument("apply_rotary: x must be [B, H, T, d], got " + c10::str(x.sizes()));
  const int64_t T = x.size(2), d = x.size(3), r = rotary_dims;
  if (r < 2 || r % 2 != 0 || r > d) {
    throw std::invalid_argument("apply_rotary: rotary_dims " + std::to_string(r) + " must be even and in [2, " +
                                std::to_string(d) + "]");
  }
  // The angles in float32 (float64 for float64 x), in transformers' order of operations, then cast.
  const auto angle_type = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const auto opts = x.options().dtype(angle_type);
  const auto inv_freq = at::reciprocal(at::pow(base, at::arange(0, r, 2, opts) / static_cast<double>(r)));  // [r/2]
  const auto positions = at::arange(first_position, first_position + T, opts);
  const auto freqs = positions.unsqueeze(1) * inv_freq.unsqueeze(0);  // [T, r/2]
  const auto angles = at::cat({freqs, freqs}, -1);                    // [T, r]
  const auto cos = angles.cos().to(x.scalar_type()), sin = angles.sin().to(x.scalar_type());

  const auto rot = x.narrow(-1, 0, r);
  const auto first_half = rot.narrow(-1, 0, r / 2), second_half = rot.narrow(-1, r / 2, r / 2);
  const auto rotated_half = at::cat({-second_half, first_half}, -1);
  auto y = rot * cos + rotated_half * sin;
  return r == d ? y : at::cat({y, x.narrow(-1, r, d - r)}, -1);
}

}  // namespace attnlab
