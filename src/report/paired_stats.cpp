#include "attnlab/paired_stats.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

#include <boost/math/distributions/non_central_t.hpp>
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

// The smallest m >= 2 with enough(m), for a predicate that once true stays true as m grows: a
// doubling search brackets m and bisection finds it; none when m would pass 2^62.
std::optional<int64_t> smallest_seeds(const std::function<bool(int64_t)>& enough) {
  int64_t lo = 2, hi = 2;
  while (!enough(hi)) {
    if (hi >= (int64_t{1} << 62)) return std::nullopt;
    lo = hi + 1, hi *= 2;
  }
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (enough(mid)) hi = mid;
    else lo = mid + 1;
  }
  return hi;
}

// The smallest m >= 2 with half_width(sd, m) < |mean| (the half-width falls strictly as m grows);
// none when mean = 0.
std::optional<int64_t> seeds_needed(double mean, double sd) {
  const double target = std::fabs(mean);
  if (!(target > 0)) return std::nullopt;
  return smallest_seeds([&](int64_t m) { return half_width(sd, m) < target; });
}

// The smallest m >= 2 with 80% power at the observed effect size (power grows with m: more degrees
// of freedom and a larger noncentrality); none when mean = 0.
std::optional<int64_t> seeds_for_power(double mean, double sd) {
  if (!(std::fabs(mean) > 0)) return std::nullopt;
  const double effect_size = sd > 0 ? std::fabs(mean) / sd : std::numeric_limits<double>::infinity();
  return smallest_seeds([&](int64_t m) { return paired_t_power(effect_size, m) >= kPowerTarget; });
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
  t.seeds_for_power = seeds_for_power(s.mean, *s.sd);
  return t;
}

double paired_t_power(double effect_size, int64_t m) {
  if (m < 2) throw std::invalid_argument("paired_t_power: needs at least 2 seeds, got " + std::to_string(m));
  if (!(effect_size >= 0)) throw std::invalid_argument("paired_t_power: effect size must be >= 0");
  const double df = double(m - 1);
  const double delta = std::sqrt(double(m)) * effect_size;
  // Beyond a noncentrality of 1e4 the power is 1 to double precision at any df (T' < c would need
  // chi_df / sqrt(df) > 1e4 / 12.71), and Boost's series cannot start there (delta^2 / 2 overflows
  // its integer index).
  if (delta >= 1e4) return 1.0;
  const double c = boost::math::quantile(boost::math::students_t_distribution<double>(df), 1 - kPowerAlpha / 2);
  const boost::math::non_central_t_distribution<double> t_prime(df, delta);
  return boost::math::cdf(boost::math::complement(t_prime, c)) + boost::math::cdf(t_prime, -c);
}

std::vector<std::optional<double>> holm_adjust(const std::vector<std::optional<double>>& p) {
  std::vector<size_t> family;
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] && !std::isnan(*p[i])) family.push_back(i);
  std::stable_sort(family.begin(), family.end(), [&](size_t a, size_t b) { return *p[a] < *p[b]; });
  std::vector<std::optional<double>> adjusted(p.size());
  const double m = double(family.size());
  double running = 0;
  for (size_t j = 0; j < family.size(); ++j) {
    running = std::max(running, std::min(1.0, (m - double(j)) * *p[family[j]]));
    adjusted[family[j]] = running;
  }
  return adjusted;
}

PairedTests paired_tests(const std::vector<double>& d, const SampleStats& s) {
  return {paired_t_test(s), sign_flip_test(d), wilcoxon_signed_rank(d), exact_p_floor(d)};
}

}  // namespace attnlab
