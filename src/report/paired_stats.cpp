#include "attnlab/paired_stats.h"

#include <cmath>

namespace attnlab {

int sign_of(double x) { return (x > 0) - (x < 0); }

SampleStats summarize(const std::vector<double>& values) {
  SampleStats s;
  s.n = static_cast<int64_t>(values.size());
  if (s.n == 0) return s;
  double sum = 0.0;
  for (double v : values) sum += v;
  s.mean = sum / double(s.n);
  if (s.n >= 2) {
    // Two passes: squares of deviations, not E[x^2] - mean^2, which cancels badly for losses ~4
    // whose differences are ~1e-3.
    double ss = 0.0;
    for (double v : values) ss += (v - s.mean) * (v - s.mean);
    s.sd = std::sqrt(ss / double(s.n - 1));
  }
  s.sign = sign_of(s.mean);
  for (double v : values) s.same_sign += sign_of(v) == s.sign;
  return s;
}

}  // namespace attnlab
