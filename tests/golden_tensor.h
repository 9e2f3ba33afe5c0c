// Golden files store tensors as nested JSON lists of numbers (tests/data/golden/README.md).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

namespace attnlab::testing_extra {

/// Nested JSON lists of numbers -> a float64 tensor of the lists' own shape.
inline at::Tensor golden_tensor(const nlohmann::json& j) {
  std::vector<double> flat;
  std::vector<int64_t> shape;
  std::function<void(const nlohmann::json&, size_t)> walk = [&](const nlohmann::json& x, size_t depth) {
    if (!x.is_array()) return flat.push_back(x.get<double>());
    if (shape.size() == depth) shape.push_back(static_cast<int64_t>(x.size()));
    for (const auto& e : x) walk(e, depth + 1);
  };
  walk(j, 0);
  return torch::tensor(flat, at::kDouble).view(shape).clone();
}

}  // namespace attnlab::testing_extra
