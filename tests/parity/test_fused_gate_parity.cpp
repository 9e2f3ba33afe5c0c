// The fused value gate (fused_gate.h) against the composed gate (gates.h): gated reads, log g, and
// the gradients into v, tau, w and c, with upstream gradients on both outputs at once.
//
// Tolerances (normalised error): float64 1e-13 (a handful of operations per key plus parameter
// gradients summed over B*T = 66 keys; measured 7e-16 worst); float32 5e-6 (the same in float, beta = 8
// amplifying d tau; measured 3.6e-7 worst).
#include <gtest/gtest.h>

#include "attnlab/fused_gate.h"
#include "parity_helpers.h"

namespace attnlab {
namespace {

struct GateRun {
  at::Tensor gated, log_gate, dv, dtau, dw, dc;
};

GateRun run_gate(bool fused, GateKind kind, const at::Tensor& v, const at::Tensor& tau, const at::Tensor& w,
                 const at::Tensor& c) {
  for (const auto* t : {&v, &tau, &w, &c}) {
    if (t->defined() && t->grad().defined()) t->mutable_grad().reset();
  }
  const GateParams params{kind, tau, w, c};
  at::Tensor gated, log_gate;
  if (fused) {
    auto out = fused_value_gate(v, params);
    gated = out.gated_v, log_gate = out.log_gate;
  } else {
    auto z = gate_logits(v, params);
    gated = (v * at::sigmoid(z).unsqueeze(-1)).to(v.scalar_type());
    log_gate = at::log_sigmoid(z);
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  auto opts = at::TensorOptions().dtype(at::kDouble);
  auto R = at::normal(0.0, 1.0, gated.sizes(), gen, opts).to(gated.scalar_type());
  auto S = at::normal(0.0, 1.0, log_gate.sizes(), gen, opts).to(log_gate.scalar_type());
  ((gated * R).sum() + (log_gate * S).sum()).backward();
  auto grad = [](const at::Tensor& t) { return t.defined() ? t.grad() : at::Tensor(); };
  return {gated.detach(), log_gate.detach(), grad(v), grad(tau), grad(w), grad(c)};
}

class GateParity : public ::testing::TestWithParam<std::tuple<GateKind, at::ScalarType>> {};

TEST_P(GateParity, FusedMatchesComposed) {
  const auto [kind, dtype] = GetParam();
  const auto acc = dtype == at::kDouble ? at::kDouble : at::kFloat;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(21);
  auto opts = at::TensorOptions().dtype(at::kDouble);
  auto v = at::normal(0.0, 1.0, {2, 3, 11, 16}, gen, opts);
  v[0][0][4].zero_();  // a zero read: the norm gate's subgradient at ||v|| = 0 must match (0)
  v = v.to(dtype).requires_grad_(true);
  at::Tensor tau, w, c;
  if (kind == GateKind::norm) {
    tau = at::normal(1.0, 0.2, {3}, gen, opts).to(acc).requires_grad_(true);
  } else {
    w = at::normal(0.0, 0.3, {3, 16}, gen, opts).to(acc).requires_grad_(true);
    c = at::normal(0.0, 1.0, {3}, gen, opts).to(acc).requires_grad_(true);
  }
  const auto want = run_gate(false, kind, v, tau, w, c);
  const auto got = run_gate(true, kind, v, tau, w, c);
  const double tol = dtype == at::kDouble ? 1e-13 : 5e-6;
  using parity::expect_close;
  expect_close(got.gated, want.gated, tol, "g v");
  expect_close(got.log_gate, want.log_gate, tol, "log g");
  expect_close(got.dv, want.dv, tol, "dv");
  expect_close(got.dtau, want.dtau, tol, "d tau");
  expect_close(got.dw, want.dw, tol, "d w");
  expect_close(got.dc, want.dc, tol, "d c");
}

INSTANTIATE_TEST_SUITE_P(Cpu, GateParity,
                         ::testing::Combine(::testing::Values(GateKind::norm, GateKind::projection),
                                            ::testing::Values(at::kFloat, at::kDouble)),
                         [](const auto& info) {
                           return to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) == at::kDouble ? "_f64" : "_f32");
                         });

// Independent values: with w = 0 the projection gate is sigmoid(c_h) for every read, so
// log g = logsigmoid(c) and g v = sigmoid(c) v; at c = -800 logsigmoid must stay finite (= -800).
TEST(FusedGate, ProjectionGateWithZeroDirection) {
  auto v = at::randn({1, 2, 5, 8}, at::kDouble);
  auto w = at::zeros({2, 8}, at::kDouble);
  auto c = torch::tensor({0.0, -800.0}, at::kDouble);
  const auto out = fused_value_gate(v, {GateKind::projection, {}, w, c});
  EXPECT_NEAR(out.log_gate[0][0][0].item<double>(), std::log(0.5), 1e-15);
  EXPECT_EQ(out.log_gate[0][1][3].item<double>(), -800.0);
  EXPECT_LT((out.gated_v[0][0] - 0.5 * v[0][0]).abs().max().item<double>(), 1e-15);
  EXPECT_EQ(out.gated_v[0][1].abs().max().item<double>(), 0.0);
}

TEST(FusedGate, RejectsMissingOrMisshapenParameters) {
  auto v = at::randn({1, 2, 5, 8});
  EXPECT_THROW(fused_value_gate(v, {GateKind::norm, {}, {}, {}}), std::invalid_argument);
  EXPECT_THROW(fused_value_gate(v, {GateKind::norm, at::zeros({3}), {}, {}}), std::invalid_argument);
  EXPECT_THROW(fused_value_gate(v, {GateKind::projection, {}, at::zeros({2, 7}), at::zeros({2})}),
               std::invalid_argument);
  EXPECT_THROW(fused_value_gate(v, {GateKind::none, {}, {}, {}}), std::invalid_argument);
}

}  // namespace
}  // namespace attnlab
