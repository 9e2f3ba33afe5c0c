// The project's rule for an attention backend in low precision (flash-attention's rule; docs/kernels.md,
// "Precision in bfloat16 / float16"): against an exact (float64) run on the same rounded inputs, a
// backend's error may be at most a factor times the error of a composed-op run in the same precision
// (the yardstick), plus a floor for when both are tiny. The parity suites, the GPU suite and the
// first-use self-check (attention_self_check.h) all hold backends to this one rule.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "attnlab/arm_call.h"
#include "attnlab/self_check_record.h"

namespace attnlab {

/// max |a - b| / max(1, max |b|) over the finite entries of b, both taken to float64 on the CPU: an
/// absolute error for O(1) values, a relative one for large values (lse near a sink logit of 100,
/// gradients summed over many queries). Matching infinities count as equal; a NaN in `a` (or one of
/// `a`, `b` infinite where the other is not) gives NaN or inf, which no bound admits.
double normalised_error(const at::Tensor& a, const at::Tensor& b);

/// The rule for a backend computing in `dtype`: kHalfRuleFloor and kFlashParamFactor in bfloat16 and
/// float16; in float32 and float64 floors of 1e-4 and 1e-10 (a run's own round-off), the same factors.
HalfRule rule_for_dtype(at::ScalarType dtype);

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
