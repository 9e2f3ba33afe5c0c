// The project's rule for an attention backend in low precision (flash-attention's rule; docs/kernels.md,
// "Precision in bfloat16 / float16"): against an exact (float64) run on the same rounded inputs, a
// backend's error may be at most a factor times the error of a composed-op run in the same precision
// (the yardstick), plus a floor for when both are tiny. The parity suites, the GPU suite and the
// first-use self-check (attention_self_check.h) all hold backends to this one rule.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "attnlab/arm_call.h"

namespace attnlab {

/// max |a - b| / max(1, max |b|) over the finite entries of b, both taken to float64 on the CPU: an
/// absolute error for O(1) values, a relative one for large values (lse near a sink logit of 100,
/// gradients summed over many queries). Matching infinities count as equal; a NaN in `a` (or one of
/// `a`, `b` infinite where the other is not) gives NaN or inf, which no bound admits.
double normalised_error(const at::Tensor& a, const at::Tensor& b);

/// Floor of the rule in bfloat16 / float16: a few ulp of bfloat16's 8-bit mantissa.
inline constexpr double kHalfRuleFloor = 2e-3;

/// The factor for the arm parameters' gradients (d b_h, d tau_h, d w_h, d c_h) in half precision.
/// Each sums B x T per-key or per-row values that nearly cancel (sum_j dS_ij = dlse_i per row), and
/// flash kernels take D_i = dO_i . o_i from the rounded o. Measured on CPU up to 2.2x
/// (docs/kernels.md).
inline constexpr double kFlashParamFactor = 3.0;

/// How a run is held to the rule. The defaults are the half-precision rule.
struct HalfRule {
  double floor = kHalfRuleFloor;     ///< added to every bound but lse's and the phantom mass's
  double factor = 2.0;               ///< o, lse, phantom mass, dq, dk, dv
  double param_factor = 2.0;         ///< d b_h, d tau_h, d w_h, d c_h (kFlashParamFactor for flash kernels)
  double lse_floor = 1e-4;           ///< lse and phantom mass stay float32 in every backend
};

/// The rule for a backend computing in `dtype`: kHalfRuleFloor and kFlashParamFactor in bfloat16 and
/// float16; in float32 and float64 floors of 1e-4 and 1e-10 (a run's own round-off), the same factors.
HalfRule rule_for_dtype(at::ScalarType dtype);

/// One output or gradient held to the rule: `error` of the backend against the exact run, the
/// yardstick's error, and the bound factor * yardstick + floor.
struct RuleCheck {
  std::string tensor;  ///< "o", "lse", "phantom mass", "dq", "dk", "dv", "d b_h", "d tau_h", "d w_h", "d c_h"
  double error = 0.0, yardstick = 0.0, bound = 0.0;
  /// error <= bound; false for a NaN error.
  bool within() const { return error <= bound; }
};

/// Every output and gradient of `got` that the arm has, held to the rule against `exact`. o, lse and
/// the phantom mass take `low` (the reference backend in the same precision) as the yardstick;
/// gradients the largest error of `low` and the `gradient_yardsticks` (run_arm_rounding_p: flash
/// kernels round P before P . v; run_arm_flash_arithmetic: their whole arithmetic, D_i from the
/// rounded o included). Tensors undefined in `exact` are skipped. Throws std::invalid_argument when
/// `got` or a yardstick lacks a tensor that `exact` has, or their shapes differ (a backend that
/// dropped an output is outside any rule).
std::vector<RuleCheck> check_run_within_rule(const ArmRun& got, const ArmRun& low, const ArmRun& exact,
                                             const std::vector<const ArmRun*>& gradient_yardsticks,
                                             const HalfRule& rule);

}  // namespace attnlab
