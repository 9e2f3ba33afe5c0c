// What a first-use attention self-check measured (attention_self_check.h, docs/kernels.md, "The
// first-use self-check"): the rule it held every output and gradient to, each tensor's error against
// float64, the verdict. Plain values, no tensors, so that final.json (final_record.h) and an
// analysis's provenance (trained_run.h) can record it without the attention headers.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace attnlab {

/// Floor of the half-precision rule in bfloat16 / float16: a few ulp of bfloat16's 8-bit mantissa.
inline constexpr double kHalfRuleFloor = 2e-3;

/// The factor for the arm parameters' gradients (d b_h, d tau_h, d w_h, d c_h). Each sums B x T
/// per-key or per-row values that nearly cancel (sum_j dS_ij = dlse_i per row), and flash kernels
/// take D_i = dO_i . o_i from the rounded o. Measured on CPU up to 2.2x (docs/kernels.md).
inline constexpr double kFlashParamFactor = 3.0;

/// How a run is held to the rule (half_precision_rule.h). The defaults are the half-precision rule.
struct HalfRule {
  double floor = kHalfRuleFloor;  ///< added to every bound but lse's and the phantom mass's
  double factor = 2.0;            ///< o, lse, phantom mass, dq, dk, dv
  double param_factor = 2.0;      ///< d b_h, d tau_h, d w_h, d c_h (kFlashParamFactor for flash kernels)
  double lse_floor = 1e-4;        ///< lse and phantom mass stay float32 in every backend
};

/// One output or gradient held to the rule: `error` of the backend against the exact run, the
/// yardstick's error, and the bound factor * yardstick + floor (normalised errors,
/// half_precision_rule.h's normalised_error).
struct RuleCheck {
  std::string tensor;  ///< "o", "lse", "phantom mass", "dq", "dk", "dv", "d b_h", "d tau_h", "d w_h", "d c_h"
  double error = 0.0, yardstick = 0.0, bound = 0.0;
  /// error <= bound; false for a NaN error.
  bool within() const { return error <= bound; }
};

/// One self-check's outcome.
struct SelfCheckResult {
  std::string backend;  ///< the backend that ran (auto resolved)
  std::string arm, dtype, device;
  int64_t head_dim = 0;
  std::vector<int64_t> shape;     ///< [B, H, T] of the case
  HalfRule rule;
  std::vector<RuleCheck> checks;  ///< every output and gradient the arm has
  double milliseconds = 0.0;      ///< wall time of the whole check (five runs of the case)

  bool passed() const;
  /// The check with the largest error / bound (a NaN error counts as the largest). Throws
  /// std::logic_error when there is none.
  const RuleCheck& worst() const;
};

/// {"backend", "arm", "dtype", "device", "head_dim", "shape": [B, H, T], "rule": {factor,
/// param_factor, floor, lse_floor}, "tensors": {name: {error, yardstick, bound}}, "worst", "passed",
/// "ms"}; a NaN error is written as null.
nlohmann::json to_json(const SelfCheckResult& result);

/// Reads to_json()'s object back (final.json, a cached analysis's provenance; `where` is its path in
/// the file). Throws std::invalid_argument naming the first key that is missing or of the wrong
/// type, or a "passed" that the errors and bounds contradict.
SelfCheckResult self_check_result_from_json(const nlohmann::json& j, const std::string& where);

struct SelfCheckCase;  // attention_self_check.h

/// A check to run in place of check_attention_backend where a run or an analysis makes its
/// first-use self-check (first_use_self_check(); tests: a planted fault). Empty: the real one.
using SelfCheckRunner = std::function<SelfCheckResult(const SelfCheckCase&)>;

}  // namespace attnlab
