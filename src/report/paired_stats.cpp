#include "attnlab/paired_stats.h"

#include <cmath>

#include <boost/math/distributions/students_t.hpp>

namespace attnlab {
namespace {

constexpr double kConfidence = 0.95;

// t_{0.975, df}: the two-sided 95% quantile of Student's t.
double t_quantile(int64_t df) {
  return boost::math::quantile(boost::math::students_t_distribution<double>(double(df)), 0.5 + kConfidence / 2);
}

// Half-width of the interval m seeds at standard deviation sd would give.
double half_width(double sd, int64_t m) { return t_quantile(m - 1) * sd / std::sqrt(double(m)); }

// The smallest m >= 2 with half_width(sd, m) < |mean|. The half-width falls strictly as m grows, so
// a doubling search brackets m and bisection finds it; none when mean = 0 or m would pass 2^62.
std::optional<int64_t> seeds_needed(double mean, double sd) {
  const double target = std::fabs(mean);
  if (!(target > 0)) return std::nullopt;
  int64_t lo = 2, hi = 2;
  while (!(half_width(sd, hi) < target)) {
    if (hi >= (int64_t{1} << 62)) return std::nullopt;
    lo = hi + 1, hi *= 2;
  }
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (half_width(sd, mid) < target) hi = mid;
    else lo = mid + 1;
  }
  return hi;
}

}  // namespace

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

std::optional<PairedTTest> paired_t_test(const SampleStats& s) {
  if (s.n < 2 || !s.sd || !std::isfinite(s.mean) || !std::isfinite(*s.sd)) return std::nullopt;
  PairedTTest t;
  t.df = s.n - 1;
  const double se = *s.sd / std::sqrt(double(s.n));
  const double half = t_quantile(t.df) * se;
  t.ci_low = s.mean - half, t.ci_high = s.mean + half;
  const double t_statistic = std::fabs(s.mean) / se;
  if (se > 0 && std::isfinite(t_statistic)) {
    const boost::math::students_t_distribution<double> dist(double(t.df));
    t.p_value = 2 * boost::math::cdf(boost::math::complement(dist, t_statistic));
  } else if (s.mean != 0) {
    t.p_value = 0.0;  // every seed gave the same non-zero difference
  }
  t.seeds_needed = seeds_needed(s.mean, *s.sd);
  return t;
}

}  // namespace attnlab
