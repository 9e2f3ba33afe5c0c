// The output-gate arms (docs/arms.md, "The output gate") against tests/data/golden/output_gate_arms.json:
// values from tools/golden_arms.py (numpy, written from the formulas), cross-checked by a second
// implementation (README beside the file). The layer's own path is checked: every backend's attention,
// then output_gate_values and gated_heads, as CausalSelfAttention composes them. Tolerances as for
// attention_arms.json: outputs 1e-12, gradients 1e-7 (central finite differences, error ~1e-9).
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "attnlab/arm_attention.h"
#include "attnlab/attention_backend.h"
#include "attnlab/output_gate.h"
#include "extra_arm.h"
#include "golden_tensor.h"

namespace attnlab {
namespace {

using json = nlohmann::json;

// output_gate_arms.json, plus the tenth-arm test's arm when it has an output gate (extra_arm.h).
const json& golden() { return testing_extra::output_gate_golden_values(); }

using testing_extra::golden_tensor;

using testing_extra::expect_golden_close;

using Case = std::tuple<std::string, AttentionBackend>;
class GoldenOutputGate : public ::testing::TestWithParam<Case> {};

TEST_P(GoldenOutputGate, LayerReproducesIndependentValues) {
  const auto& [name, backend] = GetParam();
  const auto& g = golden();
  const auto& want = g["arms"][name];
  const auto& arm = arm_by_name(name);
  const int64_t H = g["shape"][0], T = g["shape"][1], d = g["shape"][2];
  auto leaf = [](at::Tensor t) { return t.requires_grad_(true); };
  auto q = leaf(golden_tensor(g["q"]).unsqueeze(0)), k = leaf(golden_tensor(g["k"]).unsqueeze(0));
  auto v = leaf(golden_tensor(g["v"]).unsqueeze(0)), x = leaf(golden_tensor(g["x"]).unsqueeze(0));  // x [1, T, d_model]
  const auto& p = want["params"];
  auto w = leaf(golden_tensor(p["out_gate_w"])), c = leaf(golden_tensor(p["out_gate_c"]));
  ArmLayerParams params;  // the golden file's names: sink_logit, tau, w, c (README beside it)
  std::map<std::string, at::Tensor*> slots = {{"sink_logit", &params.sink_logit}, {"tau", &params.gate_tau},
                                              {"w", &params.gate_w}, {"c", &params.gate_c}};
  for (const auto& [param, slot] : slots)
    if (p.contains(param)) *slot = leaf(golden_tensor(p[param]));

  const auto keys = prepare_keys(arm, params, k, v, false, backend);
  const auto att = arm_attention(arm, params, q, keys, false, backend);
  const auto gamma = output_gate_values(x, w, c);
  const auto y = gated_heads(att.o, gamma, arm.out_gate);  // [1, T, H d]
  const auto o = y.view({1, T, H, d}).transpose(1, 2);     // the file's [H, T, d] layout
  (o * golden_tensor(g["R"]).unsqueeze(0)).sum().backward();

  expect_golden_close(o, golden_tensor(want["o"]).unsqueeze(0), 1e-12, name + " o");
  const auto gate_want = golden_tensor(want["out_gate"]);  // [H, T] or [H, T, d]
  const auto gate_got = arm.out_gate == OutputGate::headwise ? gamma[0].t() : gamma[0].view({T, H, d}).transpose(0, 1);
  expect_golden_close(gate_got, gate_want, 1e-12, name + " gate values");
  if (att.lse.defined()) {  // sdpa leaves lse undefined
    expect_golden_close(att.lse, golden_tensor(want["lse"]).unsqueeze(0), 1e-12, name + " lse (the gate leaves it)");
    const auto sink = effective_sink_logit(arm, params, H, q.options());
    const auto phantom = sink.defined() ? phantom_mass(att.lse, sink) : at::zeros_like(att.lse);
    expect_golden_close(phantom, golden_tensor(want["phantom_mass"]).unsqueeze(0), 1e-12, name + " phantom mass");
  }
  const auto& grad = want["grad"];
  std::map<std::string, at::Tensor> got = {{"q", q.grad()[0]}, {"k", k.grad()[0]}, {"v", v.grad()[0]},
                                           {"x", x.grad()[0]}, {"out_gate_w", w.grad()}, {"out_gate_c", c.grad()}};
  for (const auto& [param, slot] : slots)
    if (slot->defined()) got[param] = slot->grad();
  EXPECT_EQ(grad.size(), got.size()) << "the golden file lists another set of gradients";
  for (const auto& [param, values] : grad.items()) {
    ASSERT_TRUE(got.count(param)) << "no gradient for " << param;
    expect_golden_close(got[param], golden_tensor(values), 1e-7, name + " d " + param);
  }
}

// Every output-gate arm of the file on every CPU backend that computes its attention (sdpa: the plain
// softmax only, docs/kernels.md).
std::vector<Case> cases() {
  std::vector<Case> all;
  for (const auto& [name, _] : golden()["arms"].items()) {
    for (auto b : {AttentionBackend::reference, AttentionBackend::fused, AttentionBackend::flash, AttentionBackend::sdpa})
      if (b != AttentionBackend::sdpa || computes_plain_softmax(arm_by_name(name))) all.emplace_back(name, b);
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(Arms, GoldenOutputGate, ::testing::ValuesIn(cases()), [](const auto& info) {
  return std::get<0>(info.param) + "_" + to_string(std::get<1>(info.param));
});

TEST(GoldenOutputGate, CoversEveryOutputGateArm) {
  for (const auto& arm : all_arms())
    if (arm.out_gate != OutputGate::none) EXPECT_TRUE(golden()["arms"].contains(arm.name)) << arm.name;
}

}  // namespace
}  // namespace attnlab
