// Every in-attention arm of SPEC section 1 through the backend switch: prepare_keys + arm_attention
// with backend `fused` (fused gate + fused attention) against backend `reference` (composed gate +
// composed attention), forward and every gradient (q, k, v, b_h, tau_h, w_h, c_h).
// sink_token acts on the sequence, not inside attention: test_fused_model_parity.cpp covers it.
//
// Tolerances (normalised error): float64 1e-13 (two summation orders, measured 1.5e-15 worst);
// float32 1e-5 (measured 6.6e-7 worst: d tau_h, which sums B*T terms scaled by beta = 8).
#include <gtest/gtest.h>

#include <tuple>

#include "arm_runner.h"
#include "parity_helpers.h"
#include "extra_arm.h"

namespace attnlab {
namespace {

using parity::ArmRun;

class ArmParity : public ::testing::TestWithParam<std::tuple<std::string, at::ScalarType>> {};

TEST_P(ArmParity, FusedMatchesReferenceForwardAndBackward) {
  const auto& [name, dtype] = GetParam();
  const auto arm = parity::arm_named(name);
  const auto l = parity::as_leaves(parity::arm_values(1234, 2, 3, 33, 16), at::kCPU, dtype);  // T = 33: odd
  const ArmRun want = parity::run_arm(arm, l, AttentionBackend::reference);
  const ArmRun got = parity::run_arm(arm, l, AttentionBackend::fused);
  const double tol = dtype == at::kDouble ? 1e-13 : 1e-5;
  using parity::expect_close;
  expect_close(got.o, want.o, tol, name + " o");
  expect_close(got.lse, want.lse, tol, name + " lse");
  expect_close(got.dq, want.dq, tol, name + " dq");
  expect_close(got.dk, want.dk, tol, name + " dk");
  expect_close(got.dv, want.dv, tol, name + " dv");
  expect_close(got.db, want.db, tol, name + " d b_h");
  expect_close(got.dtau, want.dtau, tol, name + " d tau_h");
  expect_close(got.dw, want.dw, tol, name + " d w_h");
  expect_close(got.dc, want.dc, tol, name + " d c_h");
  // The arm's own parameters must receive a gradient (an all-zero one would pass the comparison
  // trivially if both sides dropped it).
  if (arm.sink == SinkKind::learned) {
    EXPECT_GT(got.db.abs().max().item<double>(), 0.0);
  }
  if (arm.gate == GateKind::norm) {
    EXPECT_GT(got.dtau.abs().max().item<double>(), 0.0);
  }
  if (arm.gate == GateKind::projection) {
    EXPECT_GT(got.dw.abs().max().item<double>(), 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(AllArms, ArmParity,
                         ::testing::Combine(::testing::ValuesIn(parity::in_attention_arm_names()),
                                            ::testing::Values(at::kFloat, at::kDouble)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + (std::get<1>(info.param) == at::kDouble ? "_f64" : "_f32");
                         });

}  // namespace
}  // namespace attnlab
