// The fused and flash backends against golden values from an implementation independent of attnlab
// (tests/data/golden/attention_arms.json, README beside it): every in-attention arm, float64.
// Tolerances from the golden README: outputs 1e-12 (the file agrees with a second independent
// implementation to 5e-16; 1e-12 allows our different summation order), gradients 1e-7 (the file's
// gradients are central finite differences with absolute error about 1e-9).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <tuple>
#include <vector>

#include "attnlab/arm_attention.h"
#include "extra_arm.h"
#include "golden_tensor.h"
#include "parity_helpers.h"

namespace attnlab {
namespace {

using nlohmann::json;

const json& golden() { return testing_extra::golden_values(); }

/// golden_tensor(), with a batch dim of 1 prepended when `batch` (the file stores (H, T, d)).
at::Tensor tensor_of(const json& j, bool batch = false) {
  auto t = testing_extra::golden_tensor(j);
  return batch ? t.unsqueeze(0) : t;
}

class Golden : public ::testing::TestWithParam<std::tuple<std::string, AttentionBackend>> {};

TEST_P(Golden, BackendReproducesIndependentValues) {
  const auto& [name, backend] = GetParam();
  const auto& g = golden();
  const auto& want = g["arms"][name];
  const auto& arm = arm_by_name(name);
  auto leaf = [](const at::Tensor& t) { return t.requires_grad_(true); };
  auto q = leaf(tensor_of(g["q"], true)), k = leaf(tensor_of(g["k"], true)), v = leaf(tensor_of(g["v"], true));
  ArmLayerParams params;
  const json empty = json::object();
  const auto& p = want.contains("params") ? want["params"] : empty;
  if (p.contains("sink_logit")) params.sink_logit = leaf(tensor_of(p["sink_logit"]));
  if (p.contains("tau")) params.gate_tau = leaf(tensor_of(p["tau"]));
  if (p.contains("w")) params.gate_w = leaf(tensor_of(p["w"]));
  if (p.contains("c")) params.gate_c = leaf(tensor_of(p["c"]));

  const auto keys = prepare_keys(arm, params, k, v, false, backend);
  const auto out = arm_attention(arm, params, q, keys, false, backend);
  (out.o * tensor_of(g["R"], true)).sum().backward();

  using parity::expect_close;
  expect_close(out.o.detach(), tensor_of(want["o"], true), 1e-12, name + " o");
  expect_close(out.lse, tensor_of(want["lse"], true), 1e-12, name + " lse");
  const auto sink = effective_sink_logit(arm, params, q.size(1), q.options());
  const auto phantom = sink.defined() ? phantom_mass(out.lse, sink) : at::zeros_like(out.lse);
  expect_close(phantom.detach(), tensor_of(want["phantom_mass"], true), 1e-12, name + " phantom mass");
  const auto& grad = want["grad"];
  expect_close(q.grad(), tensor_of(grad["q"], true), 1e-7, name + " dq");
  expect_close(k.grad(), tensor_of(grad["k"], true), 1e-7, name + " dk");
  expect_close(v.grad(), tensor_of(grad["v"], true), 1e-7, name + " dv");
  if (grad.contains("sink_logit")) expect_close(params.sink_logit.grad(), tensor_of(grad["sink_logit"]), 1e-7, name + " d b_h");
  if (grad.contains("tau")) expect_close(params.gate_tau.grad(), tensor_of(grad["tau"]), 1e-7, name + " d tau");
  if (grad.contains("w")) expect_close(params.gate_w.grad(), tensor_of(grad["w"]), 1e-7, name + " d w");
  if (grad.contains("c")) expect_close(params.gate_c.grad(), tensor_of(grad["c"]), 1e-7, name + " d c");
}

std::vector<std::string> golden_arms() {
  std::vector<std::string> names;
  for (const auto& [name, _] : golden()["arms"].items()) names.push_back(name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllArms, Golden,
                         ::testing::Combine(::testing::ValuesIn(golden_arms()),
                                            ::testing::Values(AttentionBackend::fused, AttentionBackend::flash)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + to_string(std::get<1>(info.param));
                         });

TEST(GoldenFile, CoversEveryInAttentionArm) {
  for (const auto& arm : all_arms()) {
    if (!arm.sink_token && arm.out_gate == OutputGate::none) {  // output gates: test_golden_output_gate
      EXPECT_TRUE(golden()["arms"].contains(arm.name)) << arm.name;
    }
  }
}

}  // namespace
}  // namespace attnlab
