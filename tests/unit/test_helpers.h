// Small helpers shared by the unit tests.
#pragma once

#include <vector>

#include <torch/torch.h>

namespace attnlab::testing {

inline std::vector<double> to_vector(const at::Tensor& t) {
  auto c = t.detach().to(at::kDouble).contiguous().cpu();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

inline at::Tensor from_vector(const std::vector<double>& v, at::IntArrayRef shape) {
  return torch::tensor(v, torch::kDouble).view(shape).clone();
}

inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

}  // namespace attnlab::testing
