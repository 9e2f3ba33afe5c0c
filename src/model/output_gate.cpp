#include "attnlab/output_gate.h"

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

namespace attnlab {

at::Tensor output_gate_values(const at::Tensor& x, const at::Tensor& w, const at::Tensor& c) {
  if (x.dim() != 3 || w.dim() != 2 || c.dim() != 1 || x.size(2) != w.size(0) || w.size(1) != c.size(0)) {
    throw std::invalid_argument("output gate: expected x [B, T, d_model], W_g [d_model, G], c_g [G]; got x " +
                                std::to_string(x.dim()) + "-D, W_g " + std::to_string(w.dim()) + "-D");
  }
  return at::sigmoid(at::addmm(c, x.reshape({-1, x.size(2)}), w).view({x.size(0), x.size(1), w.size(1)}));
}

at::Tensor gated_heads(const at::Tensor& o, const at::Tensor& gamma, OutputGate gate) {
  const int64_t B = o.size(0), H = o.size(1), T = o.size(2), d = o.size(3);
  auto y = o.transpose(1, 2).contiguous();  // (B, T, H, d)
  if (gate == OutputGate::none) return y.view({B, T, H * d});
  const int64_t width = gate == OutputGate::headwise ? H : H * d;
  if (gamma.dim() != 3 || gamma.size(0) != B || gamma.size(1) != T || gamma.size(2) != width) {
    throw std::invalid_argument("output gate: gamma must be [B, T, " + std::to_string(width) + "] for a " +
                                to_string(gate) + " gate over " + std::to_string(H) + " heads");
  }
  if (gate == OutputGate::headwise) return (y * gamma.unsqueeze(-1)).view({B, T, H * d});
  return y.view({B, T, H * d}) * gamma;
}

}  // namespace attnlab
