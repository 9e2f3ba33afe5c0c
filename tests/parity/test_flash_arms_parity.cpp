// The flash backend (flash_attention.h) against the composed-op reference, arm by arm, through the
// backend switch (prepare_keys + arm_attention): o, lse, phantom mass and the gradients of q, k, v,
// b_h, tau_h, w_h and c_h, with the loss reading both o and lse (so the lse-gradient path runs too),
// for T in {1, 2, 63, 64, 65, 257} (one row; the kernels' 32- and 64-row blocks and their edges),
// float32 and float64, ordinary parameters and extreme ones (b_h = +-100, gate logits +-200).
// Also: two backward calls give bit-identical gradients (the determinism flash_attention.h claims).
//
// Tolerances (normalised error, parity_helpers.h): float64 1e-12 (round-off of two summation
// orders; measured up to 8e-14). float32 2e-5 (measured up to 2.5e-6: the CPU kernel's exp is a
// vectorised polynomial), and 2e-4 with gate logits of +-200 (measured up to 3.7e-5, renorm with the
// projection gate): there renorm's logits are s_ij + r_j with r_j ~ -200, whose float32 spacing is
// 1.5e-5, and the two sides round the sum differently.
#include <gtest/gtest.h>

#include <tuple>

#include "arm_runner.h"
#include "parity_helpers.h"

namespace attnlab {
namespace {

enum class Extremes { none, sinks_and_gates };

/// Seeded values; with extremes, sinks alternate +100 / -100 over heads and the gates' logits sit
/// near +200 / -200 (norm: tau_h = -24 or 26 against ||v|| / sqrt(d) ~ 1, beta = 8; projection: c_h).
parity::ArmLeaves values(int64_t T, Extremes extremes) {
  auto l = parity::arm_values(500 + T, 2, 3, T, 16);
  if (extremes == Extremes::sinks_and_gates) {
    const auto sign = at::tensor({1.0, -1.0, 1.0}, at::kDouble);
    l.b = 100.0 * sign;
    l.tau = 1.0 - 25.0 * sign;
    l.c = 200.0 * sign;
  }
  return l;
}

void expect_bit_identical(const parity::ArmRun& a, const parity::ArmRun& b, const std::string& what) {
  const std::vector<std::pair<const char*, std::pair<at::Tensor, at::Tensor>>> pairs = {
      {"dq", {a.dq, b.dq}}, {"dk", {a.dk, b.dk}}, {"dv", {a.dv, b.dv}}, {"d b_h", {a.db, b.db}},
      {"d tau_h", {a.dtau, b.dtau}}, {"d w_h", {a.dw, b.dw}}, {"d c_h", {a.dc, b.dc}}};
  for (const auto& [name, p] : pairs) {
    ASSERT_EQ(p.first.defined(), p.second.defined()) << what << " " << name;
    if (p.first.defined()) EXPECT_TRUE(at::equal(p.first, p.second)) << what << " " << name << " differs between calls";
  }
}

using Param = std::tuple<std::string, at::ScalarType, Extremes>;
class FlashArmParity : public ::testing::TestWithParam<Param> {};

TEST_P(FlashArmParity, MatchesReferenceAtEveryLength) {
  const auto& [name, dtype, extremes] = GetParam();
  const auto arm = parity::arm_named(name);
  const double tol = dtype == at::kDouble ? 1e-12 : extremes == Extremes::none ? 2e-5 : 2e-4;
  for (int64_t T : {1, 2, 63, 64, 65, 257}) {
    const auto what = name + " T=" + std::to_string(T);
    const auto src = values(T, extremes);
    const auto l = parity::as_leaves(src, at::kCPU, dtype);
    const auto want = parity::run_arm(arm, l, AttentionBackend::reference, /*lse_in_loss=*/true);
    const auto got = parity::run_arm(arm, l, AttentionBackend::flash, /*lse_in_loss=*/true);
    parity::expect_arm_runs_close(got, want, tol, what);
    expect_bit_identical(got, parity::run_arm(arm, l, AttentionBackend::flash, true), what);
    // Every finite: b_h = +-100 and gate logits +-200 must not overflow anywhere.
    for (const auto* t : {&got.o, &got.lse, &got.dq, &got.dk, &got.dv, &got.db, &got.dtau, &got.dw, &got.dc}) {
      if (t->defined()) {
        EXPECT_TRUE(at::isfinite(*t).all().item<bool>()) << what;
      }
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [name, dtype, extremes] = info.param;
  return name + (dtype == at::kDouble ? "_f64" : "_f32") + (extremes == Extremes::none ? "" : "_extreme");
}

INSTANTIATE_TEST_SUITE_P(AllArms, FlashArmParity,
                         ::testing::Combine(::testing::ValuesIn(parity::in_attention_arm_names()),
                                            ::testing::Values(at::kFloat, at::kDouble),
                                            ::testing::Values(Extremes::none, Extremes::sinks_and_gates)),
                         param_name);

}  // namespace
}  // namespace attnlab
