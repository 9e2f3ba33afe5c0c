// The attention form of docs/arms.md against tests/data/golden/attention_arms.json: values from an
// independent float64 implementation (reproduced by tools/golden_arms.py, which also writes the values
// of an arm the file lacks: the tenth-arm test). Outputs must agree to 1e-12, gradients to 1e-7 (the golden
// gradients are central finite differences with absolute error about 1e-9).
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "attnlab/arm_attention.h"
#include "extra_arm.h"

namespace attnlab {
namespace {

using json = nlohmann::json;

const json& golden() { return testing_extra::golden_values(); }

// Nested JSON arrays -> float64 tensor of the given shape.
at::Tensor tensor_of(const json& j, at::IntArrayRef shape) {
  std::vector<double> flat;
  std::function<void(const json&)> walk = [&](const json& x) {
    if (x.is_array()) {
      for (const auto& e : x) walk(e);
    } else {
      flat.push_back(x.get<double>());
    }
  };
  walk(j);
  return torch::tensor(flat, torch::kDouble).view(shape).clone();
}

class GoldenArm : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenArm, ReproducesOutputsAndGradients) {
  const auto& g = golden();
  const auto& case_ = g["arms"][GetParam()];
  const auto arm = arm_by_name(GetParam());
  const int64_t H = g["shape"][0], T = g["shape"][1], d = g["shape"][2];
  auto q = tensor_of(g["q"], {1, H, T, d}).requires_grad_(true);
  auto k = tensor_of(g["k"], {1, H, T, d}).requires_grad_(true);
  auto v = tensor_of(g["v"], {1, H, T, d}).requires_grad_(true);
  const auto R = tensor_of(g["R"], {1, H, T, d});

  ArmLayerParams params;
  std::map<std::string, at::Tensor*> slots = {{"sink_logit", &params.sink_logit}, {"tau", &params.gate_tau},
                                              {"w", &params.gate_w}, {"c", &params.gate_c}};
  for (const auto& [name, value] : case_["params"].items()) {
    const std::vector<int64_t> shape = name == "w" ? std::vector<int64_t>{H, d} : std::vector<int64_t>{H};
    *slots.at(name) = tensor_of(value, shape).requires_grad_(true);
  }

  auto keys = prepare_keys(arm, params, k, v);
  auto out = arm_attention(arm, params, q, keys);
  auto sink = effective_sink_logit(arm, params, H, q.options());
  auto phantom = sink.defined() ? phantom_mass(out.lse, sink) : at::zeros_like(out.lse);

  EXPECT_LT((out.o - tensor_of(case_["o"], {1, H, T, d})).abs().max().item<double>(), 1e-12);
  EXPECT_LT((out.lse - tensor_of(case_["lse"], {1, H, T})).abs().max().item<double>(), 1e-12);
  EXPECT_LT((phantom - tensor_of(case_["phantom_mass"], {1, H, T})).abs().max().item<double>(), 1e-12);

  (out.o * R).sum().backward();
  std::map<std::string, at::Tensor> grads = {{"q", q.grad()}, {"k", k.grad()}, {"v", v.grad()}};
  for (const auto& [name, slot] : slots)
    if (slot->defined()) grads[name] = slot->grad();
  for (const auto& [name, want] : case_["grad"].items()) {
    ASSERT_TRUE(grads.count(name)) << "no gradient for " << name;
    const auto& got = grads[name];
    EXPECT_LT((got - tensor_of(want, got.sizes())).abs().max().item<double>(), 1e-7) << "d " << name;
  }
  EXPECT_EQ(case_["grad"].size(), grads.size()) << "golden lists a different set of gradients";
}

std::vector<std::string> golden_arms() {
  std::vector<std::string> names;
  for (const auto& [name, _] : golden()["arms"].items()) names.push_back(name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenArm, ::testing::ValuesIn(golden_arms()),
                         [](const auto& info) { return info.param; });

TEST(Golden, CoversEveryInAttentionArm) {
  for (const auto& arm : all_arms()) {
    if (arm.sink_token) continue;  // acts on the sequence, not inside attention
    if (arm.out_gate != OutputGate::none) continue;  // after attention: output_gate_arms.json (test_golden_output_gate)
    EXPECT_TRUE(golden()["arms"].contains(arm.name)) << arm.name;
  }
}

}  // namespace
}  // namespace attnlab
