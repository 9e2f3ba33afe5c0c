// Statistics of paired-seed differences (SPEC section 3): mean over seeds, sample standard deviation,
// how many seeds share the mean's sign, and the paired t analysis (95% interval, two-sided p-value,
// seeds needed). Kept apart from the report so the arithmetic is tested on its own; the report only
// chooses which numbers go in. docs/sweeps.md ("Statistics") states every formula.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace attnlab {

struct SampleStats {
  int64_t n = 0;                                          ///< number of values
  double mean = std::numeric_limits<double>::quiet_NaN();  ///< arithmetic mean; NaN when n == 0
  std::optional<double> sd;  ///< sample standard deviation, sqrt(sum (x - mean)^2 / (n - 1)); none when n < 2
  int sign = 0;              ///< sign of the mean: +1, -1, or 0 (mean exactly 0, or n == 0)
  int64_t same_sign = 0;     ///< values whose sign equals `sign` (a value of 0 shares only sign 0)
};

/// Mean, sample sd (n - 1 denominator) and sign agreement of `values` (any unit; the report passes
/// losses or loss differences in nats). Never throws; an empty input gives n = 0 and a NaN mean.
SampleStats summarize(const std::vector<double>& values);

/// -1, 0 or +1.
int sign_of(double x);

/// The paired t analysis of n differences d_1..d_n (one per seed), testing mean = 0 with Student's t
/// on n - 1 degrees of freedom (quantiles and tails from Boost.Math). With se = sd / sqrt(n):
///   interval  mean -+ t_{0.975, n-1} se
///   p-value   2 P(T_{n-1} > |mean| / se)
///   seeds     the smallest m >= 2 with t_{0.975, m-1} sd / sqrt(m) < |mean|: how many seeds an
///             interval at the observed sd would need to exclude 0 (half-width below |mean|)
struct PairedTTest {
  int64_t df = 0;                   ///< n - 1
  double ci_low = 0, ci_high = 0;   ///< the 95% interval of the mean (same unit as the values)
  std::optional<double> p_value;    ///< none when sd = 0 and mean = 0 (0/0)
  std::optional<int64_t> seeds_needed;  ///< none when mean = 0 (no n suffices)
};

/// The test of `s` (from summarize()). std::nullopt when s.n < 2 (no sd, so no interval). With
/// sd = 0 the interval is [mean, mean], p = 0 (mean != 0) and 2 seeds suffice. Never throws.
std::optional<PairedTTest> paired_t_test(const SampleStats& s);

}  // namespace attnlab
