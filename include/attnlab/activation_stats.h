// Massive-activation statistics of one residual-stream hidden state (SPEC section 5, paper 003), and
// the comparisons across checkpoints and seeds that paper 003 uses. Pure functions of numbers, so
// tests feed hand-made states; the capture from a model is activation_capture.h.
//
// Layer convention everywhere: "residual stream after block l, before the final LayerNorm; l = 0 is
// the embedding output" (ForwardHooks::on_residual).
//
// "Massive" (the literature's "max > 100 and about 1000x the median", Sun et al. 2024) is made
// precise by MassiveCriterion: max_c |x_c| > min_max AND max / median >= min_ratio, defaults 100 and
// 1000. Both thresholds are configurable and recorded beside every flag they produce.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json_fwd.hpp>

namespace attnlab {

/// Thresholds of the "massive" flag (see the top of this file).
struct MassiveCriterion {
  double min_max = 100.0;     ///< max_c |x_c| must exceed this (activation units)
  double min_ratio = 1000.0;  ///< and max / median |x_c| must reach this
};

/// One channel and its signed value x_c.
struct ChannelValue {
  int64_t channel = 0;
  double value = 0.0;
};

/// Statistics of one hidden state x [d_model], accumulated in float64 (SPEC section 5).
struct ActivationStats {
  double max_abs = 0.0;            ///< m = max_c |x_c|
  int64_t argmax = 0;              ///< the dominant channel (lowest index on ties)
  std::vector<ChannelValue> top;   ///< top-k channels by |x_c|, descending, signed values
  double median_abs = 0.0;         ///< median_c |x_c| (mean of the two middle values for even d_model)
  double ratio = 0.0;              ///< r = m / median; +inf when the median is 0 and m > 0, 0 when x = 0
  double rms = 0.0;                ///< sqrt(mean_c x_c^2)
  double top3_share = 0.0;         ///< share of ||x||^2 in the 3 largest |x_c| (0 when x = 0)
  bool massive = false;            ///< MassiveCriterion met
};

/// |x_c| of a state x [d_model] (any floating dtype, any device) as float64 on the host.
/// Throws std::invalid_argument unless x is 1-D and non-empty.
std::vector<double> abs_channels(const at::Tensor& x);

/// Channels ordered by descending `abs_values` (ties: lower channel first), the first min(k, d).
std::vector<int64_t> top_channels(const std::vector<double>& abs_values, int64_t k);

/// Statistics of x [d_model] with the top `top_k` channels (clamped to d_model).
/// Throws std::invalid_argument for a non-1-D or empty x, or top_k < 1.
ActivationStats activation_stats(const at::Tensor& x, int64_t top_k = 8, const MassiveCriterion& massive = {});

/// Average ranks (1-based; tied values share the mean of their ranks), as Spearman's rho with ties.
std::vector<double> average_ranks(const std::vector<double>& values);

/// Spearman rank correlation: Pearson correlation of the average ranks of a and b. NaN when either
/// has all values tied (no ranking). Throws std::invalid_argument for sizes that differ or are < 2.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

/// |A n B| / |A u B| of two channel sets (duplicates ignored); 1 when both are empty.
double jaccard(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

/// Lock-in step: the first step s_i (ascending `steps`) from which the dominant channel equals the
/// final one at every later checkpoint, i.e. argmax[j] == argmax.back() for all j >= i. Always a
/// value (the final step at worst); std::nullopt only for empty input.
/// Throws std::invalid_argument when the sizes differ.
std::optional<int64_t> lock_in_step(const std::vector<int64_t>& steps, const std::vector<int64_t>& argmax);

/// {"max_abs", "argmax", "top": [[channel, value], ...], "median_abs", "ratio", "rms", "top3_share",
/// "massive"}; a ratio of +inf is written as null.
nlohmann::json to_json(const ActivationStats& s);
/// Reads what to_json wrote (null ratio -> +inf). Throws nlohmann::json::exception on a missing key.
ActivationStats activation_stats_from_json(const nlohmann::json& j);

}  // namespace attnlab
