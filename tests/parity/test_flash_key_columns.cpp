// The flash backend's CUDA composition, run with the CPU kernel (FlashComposition::key_columns): the
// routing bias and the lse gradient ride in three extra head_dim columns each, as hi + mid + lo parts
// exact in the input dtype, and head_dim is padded to a multiple of 8 (docs/kernels.md, "The flash
// backend"). CUDA runs exactly this code around FlashAttention-2, so these tests are how CI checks
// the GPU path's arithmetic without a GPU; tests/gpu/test_flash_cuda_parity.cpp checks the kernel.
//
//  - float32 and float64: every in-attention arm against the composed-op reference, as tightly as the
//    CPU composition (test_flash_arms_parity.cpp), ordinary and extreme parameters (b_h = +-100, gate
//    logits +-200), T in {1, 2, 63, 64, 65, 257}; head_dim 16 (padded to 24 with a bias) and 61 (64).
//  - bfloat16 and float16, where the parts matter: flash-attention's rule (arm_runner.h), the error
//    against a float64 run on the same rounded inputs at most twice the error of a composed-op run in
//    the same precision, for both compositions: the reference backend for o, lse and the phantom mass,
//    and for gradients the larger error of it and of a run rounding P as the kernels do, 3x for the
//    arm parameters' gradients (parity::expect_run_within_rule, kFlashParamFactor). T <= 32 only: see
//    below.
//  - bfloat16 and float16, key columns against the kernel mask: the two carry the bias and the lse
//    gradient to about float32 precision in different ways around the same kernel, so every output
//    and gradient agrees to a few ulp of the half type, where a part lost or misplaced shows.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "arm_runner.h"
#include "attnlab/flash_attention.h"
#include "parity_helpers.h"

namespace attnlab {
namespace {

enum class Extremes { none, sinks_and_gates };

/// Seeded values; with extremes, sinks alternate +100 / -100 over heads and gate logits sit near
/// +200 / -200 (as in test_flash_arms_parity.cpp).
parity::ArmLeaves values(int64_t T, int64_t d, Extremes extremes) {
  auto l = parity::arm_values(700 + T + d, 2, 3, T, d);
  if (extremes == Extremes::sinks_and_gates) {
    const auto sign = at::tensor({1.0, -1.0, 1.0}, at::kDouble);
    l.b = 100.0 * sign, l.tau = 1.0 - 25.0 * sign, l.c = 200.0 * sign;
  }
  return l;
}

parity::ArmRun run_flash(const ArmSpec& arm, const parity::ArmLeaves& l, FlashComposition composition) {
  const parity::ArmAttend attend = [composition](const ArmSpec& a, const ArmLayerParams& p, const at::Tensor& q,
                                                 const PreparedKeys& keys) {
    return flash_attention(arm_attention_inputs(a, p, q, keys), composition);
  };
  return parity::run_arm_with(arm, l, AttentionBackend::flash, attend, /*lse_in_loss=*/true);
}

std::string extremes_name(Extremes e) { return e == Extremes::none ? "" : "_extreme"; }

using Param = std::tuple<std::string, at::ScalarType, Extremes>;
using HalfParam = std::tuple<std::string, at::ScalarType>;

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [name, dtype, extremes] = info.param;
  return name + (dtype == at::kDouble ? "_f64" : "_f32") + extremes_name(extremes);
}

std::string half_param_name(const ::testing::TestParamInfo<HalfParam>& info) {
  const auto& [name, dtype] = info.param;
  return name + (dtype == at::kHalf ? "_f16" : "_bf16");
}

class FlashKeyColumns : public ::testing::TestWithParam<Param> {};

TEST_P(FlashKeyColumns, MatchesReferenceAtEveryLength) {
  const auto& [name, dtype, extremes] = GetParam();
  const auto arm = parity::arm_named(name);
  // As test_flash_arms_parity.cpp: float64 round-off of two summation orders; float32 the CPU
  // kernel's vectorised exp, and r_j ~ -200 rounded differently in s_ij + r_j.
  const double tol = dtype == at::kDouble ? 1e-12 : extremes == Extremes::none ? 2e-5 : 2e-4;
  for (int64_t d : {16, 61}) {
    for (int64_t T : {1, 2, 63, 64, 65, 257}) {
      const auto what = name + " d=" + std::to_string(d) + " T=" + std::to_string(T);
      const auto l = parity::as_leaves(values(T, d, extremes), at::kCPU, dtype);
      const auto want = parity::run_arm(arm, l, AttentionBackend::reference, /*lse_in_loss=*/true);
      parity::expect_arm_runs_close(run_flash(arm, l, FlashComposition::key_columns), want, tol, what);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllArms, FlashKeyColumns,
                         ::testing::Combine(::testing::ValuesIn(parity::in_attention_arm_names()),
                                            ::testing::Values(at::kFloat, at::kDouble),
                                            ::testing::Values(Extremes::none, Extremes::sinks_and_gates)),
                         param_name);

class FlashHalfPrecision : public ::testing::TestWithParam<HalfParam> {};

TEST_P(FlashHalfPrecision, BothCompositionsWithinTwiceTheReferenceError) {
  const auto& [name, dtype] = GetParam();
  const auto arm = parity::arm_named(name);
  // One block of queries: LibTorch's CPU kernel adds each 32-row query block's share of dq, dk and
  // dv into the half-precision result, so beyond 32 rows it rounds them once per block, where
  // FlashAttention-2 accumulates in float32 and rounds once (docs/kernels.md).
  for (auto extremes : {Extremes::none, Extremes::sinks_and_gates}) {
    for (int64_t T : {1, 2, 17, 32}) {
      const auto src = parity::rounded(values(T, 64, extremes), dtype);
      const auto exact =
          parity::run_arm(arm, parity::as_leaves(src, at::kCPU, at::kDouble), AttentionBackend::reference, true);
      const auto l = parity::as_leaves(src, at::kCPU, dtype);
      const auto low = parity::run_arm(arm, l, AttentionBackend::reference, true);
      const auto rounding_p = parity::run_arm_rounding_p(arm, l);
      const parity::HalfRule rule{parity::kHalfRuleFloor, 2.0, parity::kFlashParamFactor};
      const auto what = name + " T=" + std::to_string(T) + extremes_name(extremes);
      parity::expect_run_within_rule(run_flash(arm, l, FlashComposition::key_columns), low, exact, what + " key columns", rule, &rounding_p);
      parity::expect_run_within_rule(run_flash(arm, l, FlashComposition::device), low, exact, what + " kernel mask", rule, &rounding_p);
    }
  }
}

// lse of the two compositions: measured up to 2.4e-7 (float32 round-off of two summation orders).
constexpr double kLseAgreement = 7e-7;

TEST_P(FlashHalfPrecision, KeyColumnsAgreeWithTheKernelMask) {
  const auto& [name, dtype] = GetParam();
  const auto arm = parity::arm_named(name);
  // One ulp of the half type at 1 (normalised error): measured up to 0.39 ulp (bfloat16) and 0.29 ulp
  // (float16), renorm at T = 65; a bias carried by its hi part alone is off by 0.44 at gate logits -200.
  const double tol = dtype == at::kBFloat16 ? 0x1p-7 : 0x1p-10;
  for (auto extremes : {Extremes::none, Extremes::sinks_and_gates}) {
    for (int64_t T : {1, 17, 65, 257}) {
      const auto l = parity::as_leaves(parity::rounded(values(T, 64, extremes), dtype), at::kCPU, dtype);
      const auto what = name + " T=" + std::to_string(T) + extremes_name(extremes);
      const auto mask = run_flash(arm, l, FlashComposition::device);
      const auto columns = run_flash(arm, l, FlashComposition::key_columns);
      for (const auto& [a, b, part] : {std::tuple{columns.o, mask.o, "o"}, {columns.lse, mask.lse, "lse"},
                                       {columns.dq, mask.dq, "dq"}, {columns.dk, mask.dk, "dk"}, {columns.dv, mask.dv, "dv"},
                                       {columns.db, mask.db, "d b_h"}, {columns.dtau, mask.dtau, "d tau_h"},
                                       {columns.dw, mask.dw, "d w_h"}, {columns.dc, mask.dc, "d c_h"}}) {
        ASSERT_EQ(a.defined(), b.defined()) << what << " " << part;
        if (!a.defined()) continue;
        // lse stays float32 on both sides: a part of the bias lost shifts it by 1.4e-6 or more.
        EXPECT_LE(parity::normalised_error(a, b), std::string(part) == "lse" ? kLseAgreement : tol) << what << " " << part;
      }
    }
  }
}

// The routing-bias gradient in half types against float64 autograd on the same rounded inputs, with
// and without a sink: summed over the keys of each (batch, head) (what the backward restores, and
// what a gate parameter's gradient nearly is), weighted by mixed-gate weights, and key by key.
TEST(FlashHalfPrecisionRouting, BiasGradientsMatchFloat64) {
  for (auto dtype : {at::kBFloat16, at::kHalf}) {
    for (std::optional<double> sink : {std::optional<double>(), std::optional(0.5), std::optional(3.0)}) {
      for (auto composition : {FlashComposition::device, FlashComposition::key_columns}) {
        parity::Case c;
        c.B = 2, c.H = 3, c.Tq = c.Tk = 40, c.d = 64, c.dtype = at::kDouble, c.bias = true, c.sink = sink.has_value();
        c.sink_value = sink.value_or(0.0);
        const auto src = parity::make_leaves(c);
        auto run = [&](at::ScalarType type) {
          auto leaf = [&](const at::Tensor& t, at::ScalarType ty) { return t.detach().to(dtype).to(ty).requires_grad_(true); };
          const auto acc = type == at::kDouble ? at::kDouble : at::kFloat;
          parity::Leaves l{leaf(src.q, type), leaf(src.k, type), leaf(src.v, type), src.bias.detach().to(acc).requires_grad_(true),
                           c.sink ? src.sink.detach().to(acc).requires_grad_(true) : at::Tensor(), {}};
          AttentionInputs in{l.q, l.k, l.v, l.bias, l.sink, {}};
          const auto out = type == at::kDouble ? reference_attention(in) : flash_attention(in, composition);
          auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
          const auto f64 = at::TensorOptions().dtype(at::kDouble);
          const auto R = at::normal(0.0, 1.0, out.o.sizes(), gen, f64), S = at::normal(0.0, 1.0, out.lse.sizes(), gen, f64);
          ((out.o.to(at::kDouble) * R).sum() + (out.lse.to(at::kDouble) * S).sum()).backward();
          return l.bias.grad().to(at::kDouble);
        };
        const auto got = run(dtype), want = run(at::kDouble);
        auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
        const auto w = at::rand(want.sizes(), gen, at::TensorOptions().dtype(at::kDouble));  // like 1 - g_j, mixed gates
        const double unit = dtype == at::kBFloat16 ? 0x1p-8 : 0x1p-11;  // unit roundoff
        const double scale = want.abs().max().item<double>();
        const double sum_err = ((got - want).sum(-1).abs().max() / want.abs().sum(-1).max()).item<double>();
        const double weighted_err = (((got - want) * w).sum(-1).abs().max() / (want * w).abs().sum(-1).max()).item<double>();
        const double key_err = (got - want).abs().max().item<double>() / scale;
        const auto what = std::string(c10::toString(dtype)) + (sink ? " b_h = " + std::to_string(*sink) : " no sink");
        // Measured, relative to sum_j |d r_j| and in units of the unit roundoff u: the sum within 2.5e-8
        // without a sink (float32 round-off; 0.5 u before the backward restored it) and 0.18 u with one
        // (its target takes D_i from the rounded o'; 0.2-0.6 u unrestored); weighted 0.24 u; key by
        // key 0.84 u of max |d r_j|.
        EXPECT_LT(sum_err, sink ? unit / 4 : 1e-6) << what << ": sum over keys";
        EXPECT_LT(weighted_err, unit) << what << ": weighted sum over keys";
        EXPECT_LT(key_err, 4 * unit) << what << ": key by key";
      }
    }
  }
}

// float16 with a small explicit scale: r_j / scale past float16's range would make the bias parts
// -inf, inf and NaN; the floor rises to -60000 x scale instead. Keys far below it take no weight
// either way, so the result is the reference's.
TEST(FlashHalfPrecisionRouting, SmallScaleKeepsFloat16BiasPartsFinite) {
  parity::Case c;
  c.B = 1, c.H = 2, c.Tq = c.Tk = 24, c.d = 64, c.dtype = at::kDouble, c.bias = true;
  const auto src = parity::make_leaves(c);
  auto bias = src.bias.detach().clone();
  bias.select(-1, 3).fill_(-900.0);  // r_3 / 0.01 = -90000: past float16's range
  for (auto composition : {FlashComposition::device, FlashComposition::key_columns}) {
    auto run = [&](at::ScalarType type, bool flash) {
      auto leaf = [&](const at::Tensor& t) { return t.detach().to(at::kHalf).to(type); };
      AttentionInputs in{leaf(src.q), leaf(src.k), leaf(src.v), bias.to(type == at::kDouble ? at::kDouble : at::kFloat), {}, {}};
      in.scale = 0.01;
      const auto out = flash ? flash_attention(in, composition) : reference_attention(in);
      return std::pair{out.o.to(at::kDouble), out.lse.to(at::kDouble)};
    };
    const auto [o, lse] = run(at::kHalf, true);
    const auto [o_exact, lse_exact] = run(at::kDouble, false);
    EXPECT_TRUE(at::isfinite(o).all().item<bool>() && at::isfinite(lse).all().item<bool>());
    EXPECT_LT(parity::normalised_error(o, o_exact), 0x1p-9);
    EXPECT_LT(parity::normalised_error(lse, lse_exact), 1e-4);  // measured 2.1e-5, as the kernel mask
  }
}

INSTANTIATE_TEST_SUITE_P(AllArms, FlashHalfPrecision,
                         ::testing::Combine(::testing::ValuesIn(parity::in_attention_arm_names()),
                                            ::testing::Values(at::kBFloat16, at::kHalf)),
                         half_param_name);

}  // namespace
}  // namespace attnlab
