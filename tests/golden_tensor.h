// Golden files store tensors as nested JSON lists of numbers (tests/data/golden/README.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
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

/// max |got - want| below `tol` (absolute: golden values are float64), shapes equal; `what` names it.
inline void expect_golden_close(const at::Tensor& got, const at::Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_LT((got.detach() - want).abs().max().item<double>(), tol) << what;
}

}  // namespace attnlab::testing_extra
