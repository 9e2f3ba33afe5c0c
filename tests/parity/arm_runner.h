// One arm's attention layer, forward and backward, on any backend, device and dtype: the piece the
// CPU arm parity suite and the GPU suite share.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "attnlab/arm_attention.h"
#include "attnlab/arm_call.h"
#include "attnlab/half_precision_rule.h"
#include "extra_arm.h"  // before any suite enumerates the registry
#include "parity_helpers.h"

namespace attnlab::parity {

// The arm call and the half-precision rule live in the library (arm_call.h, half_precision_rule.h),
// shared with the first-use self-check; the names stay here for the suites.
using attnlab::ArmAttend;
using attnlab::ArmLeaves;
using attnlab::ArmRun;
using attnlab::as_leaves;
using attnlab::attention_rounding_p;
using attnlab::HalfRule;
using attnlab::kFlashParamFactor;
using attnlab::kHalfRuleFloor;
using attnlab::rounded;
using attnlab::run_arm;
using attnlab::run_arm_rounding_p;
using attnlab::run_arm_with;

/// Seeded float64 CPU values. tau sits near ||v|| / sqrt(d) ~ 1, so norm gates spread over (0, 1).
inline ArmLeaves arm_values(uint64_t seed, int64_t B, int64_t H, int64_t T, int64_t d) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto opts = at::TensorOptions().dtype(at::kDouble);
  auto normal = [&](at::IntArrayRef shape, double mean, double stdev) { return at::normal(mean, stdev, shape, gen, opts); };
  return {normal({B, H, T, d}, 0, 1), normal({B, H, T, d}, 0, 1), normal({B, H, T, d}, 0, 1), normal({H}, 0, 1),
          normal({H}, 1.0, 0.2),      normal({H, d}, 0, 0.3),      normal({H}, 0, 1)};
}

/// The input class of keys sharing a large common component: k_j + c, with one c per head (seeded,
/// each element ~ N(0, magnitude^2)), like the mean key direction of trained models. Softmax ignores
/// it (q_i . c is the same for every key of row i), but a half-precision backward that takes D_i from
/// the rounded o and rounds dS before dq = scale dS k leaves sum_j dS_ij's rounding in dq, times |c|
/// (docs/kernels.md, "Precision in bfloat16 / float16"). Every half-precision parity suite runs it.
inline ArmLeaves with_shared_key_component(ArmLeaves l, double magnitude = 8.0, uint64_t seed = 31) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto c = at::normal(0.0, magnitude, {1, l.k.size(1), 1, l.k.size(3)}, gen, at::TensorOptions().dtype(at::kDouble));
  l.k = l.k + c.to(l.k.device());
  return l;
}

/// Every output and gradient of two runs within `tol` (normalised error, parity_helpers.h).
inline void expect_arm_runs_close(const ArmRun& got, const ArmRun& want, double tol, const std::string& what) {
  expect_close(got.o, want.o, tol, what + " o");
  expect_close(got.lse, want.lse, tol, what + " lse");
  expect_close(got.phantom, want.phantom, tol, what + " phantom mass");
  expect_close(got.dq, want.dq, tol, what + " dq");
  expect_close(got.dk, want.dk, tol, what + " dk");
  expect_close(got.dv, want.dv, tol, what + " dv");
  expect_close(got.db, want.db, tol, what + " d b_h");
  expect_close(got.dtau, want.dtau, tol, what + " d tau_h");
  expect_close(got.dw, want.dw, tol, what + " d w_h");
  expect_close(got.dc, want.dc, tol, what + " d c_h");
}

/// flash-attention's rule for half precision: against an exact (float64) run on the same rounded
/// inputs, the error of `got` may be at most `factor` (2) times `yardstick_error`, the error of a
/// composed-op run in the same precision, plus `floor` for when both are tiny (normalised errors).
inline void expect_within_rule(const at::Tensor& got, double yardstick_error, const at::Tensor& exact,
                               const std::string& what, double floor, double factor = 2.0) {
  ASSERT_EQ(got.defined(), exact.defined()) << what;
  if (!exact.defined()) return;
  const double err = normalised_error(got, exact);
  EXPECT_LE(err, factor * yardstick_error + floor)
      << what << ": error " << err << ", yardstick error " << yardstick_error << " (allowed " << factor << "x)";
}

/// The rule with the reference run `low` as the yardstick.
inline void expect_within_rule(const at::Tensor& got, const at::Tensor& low, const at::Tensor& exact,
                               const std::string& what, double floor) {
  if (exact.defined()) ASSERT_TRUE(low.defined()) << what;
  expect_within_rule(got, exact.defined() ? normalised_error(low, exact) : 0.0, exact, what, floor);
}

/// The rule for every output and gradient of an arm run (attnlab::check_run_within_rule, the one the
/// self-check applies): o, lse and the phantom mass against the reference backend run in the same
/// precision (`low`); gradients, when `rounding_p` is given, against the larger of its error and
/// rounding_p's.
inline void expect_run_within_rule(const ArmRun& got, const ArmRun& low, const ArmRun& exact, const std::string& what,
                                   const HalfRule& rule = {}, const ArmRun* rounding_p = nullptr) {
  std::vector<const ArmRun*> yardsticks;
  if (rounding_p != nullptr) yardsticks.push_back(rounding_p);
  for (const auto& c : check_run_within_rule(got, low, exact, yardsticks, rule)) {
    EXPECT_TRUE(c.within()) << what << " " << c.tensor << ": error " << c.error << ", yardstick error " << c.yardstick
                            << ", bound " << c.bound;
  }
}

/// run_arm on `backend` for a local layer of `window` (docs/windows.md); the loss reads lse too,
/// except on sdpa, which returns none.
inline ArmRun run_arm_windowed(const ArmSpec& arm, const ArmLeaves& l, AttentionBackend backend,
                               const AttentionWindow& window) {
  return run_arm_with(arm, l, backend, [&](const ArmSpec& a, const ArmLayerParams& p, const at::Tensor& q,
                                           const PreparedKeys& keys) {
    return arm_attention(a, p, q, keys, false, backend, window);
  }, /*lse_in_loss=*/backend != AttentionBackend::sdpa);
}

/// `name` as an arm; "renorm_proj" is renorm with the projection gate form (SPEC: configurable).
inline ArmSpec arm_named(const std::string& name) {
  return name == "renorm_proj" ? with_routing_gate(arm_by_name("renorm"), GateKind::projection) : arm_by_name(name);
}

/// Every in-attention arm, plus renorm_proj. sink_token acts on the sequence and the output gate after
/// the attention, whose core is another arm's (out_gate's is baseline's): model-level and
/// test_golden_output_gate tests cover them.
inline std::vector<std::string> in_attention_arm_names() {
  std::vector<std::string> names;
  for (const auto& arm : all_arms())
    if (!arm.sink_token && arm.out_gate == OutputGate::none) names.push_back(arm.name);
  names.push_back("renorm_proj");
  return names;
}

}  // namespace attnlab::parity
