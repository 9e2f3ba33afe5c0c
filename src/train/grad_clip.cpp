#include "attnlab/grad_clip.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>

namespace attnlab {

double global_grad_norm(const std::vector<at::Tensor>& parameters) {
  std::vector<at::Tensor> norms;  // float64 scalars on the gradients' device
  for (const auto& p : parameters) {
    const at::Tensor& grad = p.grad();
    if (grad.defined()) norms.push_back(at::linalg_vector_norm(grad.detach(), 2, std::nullopt, false, at::kDouble));
  }
  if (norms.empty()) return 0.0;
  // A float32 element is below 3.5e38, so a float64 sum of squares stays below 1.2e77 times the
  // element count: finite for any model that fits in memory.
  return at::linalg_vector_norm(at::stack(norms), 2).item<double>();
}

bool clip_gradients(const std::vector<at::Tensor>& parameters, double norm, double max_norm) {
  if (!std::isfinite(norm)) {
    throw std::invalid_argument("clip_gradients: the gradient norm is " + std::to_string(norm) +
                                "; a non-finite norm cannot be clipped");
  }
  if (max_norm <= 0) return false;
  const double factor = max_norm / (norm + 1e-6);
  if (factor >= 1.0) return false;
  for (const auto& p : parameters) {
    if (p.grad().defined()) p.grad().detach().mul_(factor);
  }
  return true;
}

}  // namespace attnlab
