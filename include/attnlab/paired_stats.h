// Statistics of paired-seed differences (SPEC section 3): mean over seeds, sample standard deviation
// and how many seeds share the mean's sign. Kept apart from the report so the arithmetic is tested
// on its own; the report only chooses which numbers go in.
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

}  // namespace attnlab
