// Sliding windows (docs/windows.md) against tests/data/golden/window_arms.json: values from
// tools/golden_arms.py (numpy, float64, written from the rule V(i) = {j <= i : i - j < W or j < n}),
// cross-checked by tools/golden_windows_crosscheck.py (torch autograd). Every CPU backend that
// serves a local layer (reference, fused) runs the layer's path: prepare_keys, arm_attention under
// the window, and the output gate where the arm has one. Tolerances as for the other golden files:
// outputs 1e-12, gradients 1e-7 (central finite differences).
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "attnlab/arm_attention.h"
#include "attnlab/output_gate.h"
#include "extra_arm.h"
#include "golden_tensor.h"

namespace attnlab {
namespace {

using json = nlohmann::json;
using testing_extra::golden_tensor;

// window_arms.json, plus the tenth-arm test's windowed case (extra_arm.h).
const json& golden() { return testing_extra::window_golden_values(); }

using testing_extra::expect_golden_close;

using Case = std::tuple<std::string, AttentionBackend>;
class GoldenWindows : public ::testing::TestWithParam<Case> {};

TEST_P(GoldenWindows, LayerReproducesIndependentValues) {
  const auto& [case_name, backend] = GetParam();
  const auto& g = golden();
  const auto& want = g["arms"][case_name];
  const auto& arm = arm_by_name(want["arm"].get<std::string>());
  const AttentionWindow window{want["window"].get<int64_t>(), want["keep_first"].get<int64_t>()};
  const int64_t H = g["shape"][0], T = g["shape"][1], d = g["shape"][2];
  auto leaf = [](at::Tensor t) { return t.requires_grad_(true); };
  auto q = leaf(golden_tensor(g["q"]).unsqueeze(0)), k = leaf(golden_tensor(g["k"]).unsqueeze(0));
  auto v = leaf(golden_tensor(g["v"]).unsqueeze(0)), x = leaf(golden_tensor(g["x"]).unsqueeze(0));
  const auto& p = want["params"];
  ArmLayerParams params;  // the golden file's names (tests/data/golden/README.md)
  std::map<std::string, at::Tensor*> slots = {{"sink_logit", &params.sink_logit}, {"tau", &params.gate_tau},
                                              {"w", &params.gate_w}, {"c", &params.gate_c}};
  for (const auto& [param, slot] : slots)
    if (p.contains(param)) *slot = leaf(golden_tensor(p[param]));
  at::Tensor gate_w, gate_c;
  if (arm.out_gate != OutputGate::none) gate_w = leaf(golden_tensor(p["out_gate_w"])), gate_c = leaf(golden_tensor(p["out_gate_c"]));

  const auto keys = prepare_keys(arm, params, k, v, false, backend);
  const auto att = arm_attention(arm, params, q, keys, false, backend, window);
  at::Tensor o = att.o;
  if (arm.out_gate != OutputGate::none) {
    o = gated_heads(att.o, output_gate_values(x, gate_w, gate_c), arm.out_gate).view({1, T, H, d}).transpose(1, 2);
  }
  (o * golden_tensor(g["R"]).unsqueeze(0)).sum().backward();

  expect_golden_close(o, golden_tensor(want["o"]).unsqueeze(0), 1e-12, case_name + " o");
  expect_golden_close(att.lse, golden_tensor(want["lse"]).unsqueeze(0), 1e-12, case_name + " lse");
  const auto sink = effective_sink_logit(arm, params, H, q.options());
  const auto phantom = sink.defined() ? phantom_mass(att.lse, sink) : at::zeros_like(att.lse);
  expect_golden_close(phantom, golden_tensor(want["phantom_mass"]).unsqueeze(0), 1e-12, case_name + " phantom mass");
  std::map<std::string, at::Tensor> got = {{"q", q.grad()[0]}, {"k", k.grad()[0]}, {"v", v.grad()[0]}};
  if (gate_w.defined()) got["x"] = x.grad()[0], got["out_gate_w"] = gate_w.grad(), got["out_gate_c"] = gate_c.grad();
  for (const auto& [param, slot] : slots)
    if (slot->defined()) got[param] = slot->grad();
  const auto& grad = want["grad"];
  EXPECT_EQ(grad.size(), got.size()) << "the golden file lists another set of gradients";
  for (const auto& [param, values] : grad.items()) {
    ASSERT_TRUE(got.count(param)) << "no gradient for " << param;
    expect_golden_close(got[param], golden_tensor(values), 1e-7, case_name + " d " + param);
  }
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const auto& [name, _] : golden()["arms"].items())
    for (auto b : {AttentionBackend::reference, AttentionBackend::fused}) all.emplace_back(name, b);
  return all;
}

INSTANTIATE_TEST_SUITE_P(Windows, GoldenWindows, ::testing::ValuesIn(cases()), [](const auto& info) {
  return std::get<0>(info.param) + "_" + to_string(std::get<1>(info.param));
});

// The file holds windows that hide keys and windows that do not (W + n >= T): both kinds are checked.
TEST(GoldenWindows, FileCoversHidingAndFullWindows) {
  int hiding = 0, full = 0;
  const int64_t T = golden()["shape"][1];
  for (const auto& [name, c] : golden()["arms"].items()) {
    (AttentionWindow{c["window"], c["keep_first"]}.hides_keys(T) ? hiding : full) += 1;
  }
  EXPECT_GT(hiding, 0);
  EXPECT_GT(full, 0);
}

}  // namespace
}  // namespace attnlab
