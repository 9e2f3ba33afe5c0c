// The distribution-free companions of the paired t test: the exact sign-flip permutation test and the
// Wilcoxon signed-rank test (paired_stats.h states both, with their sources).
#include <algorithm>
#include <cmath>
#include <numeric>

#include <boost/math/distributions/normal.hpp>

#include "attnlab/paired_stats.h"

namespace attnlab {
namespace {

bool all_finite(const std::vector<double>& d) {
  return std::all_of(d.begin(), d.end(), [](double v) { return std::isfinite(v); });
}

std::vector<double> nonzero_values(const std::vector<double>& d) {
  std::vector<double> out;
  for (double v : d)
    if (v != 0) out.push_back(v);
  return out;
}

// Midranks of |x| (ranks 1..m, equal values share the mean of their ranks), doubled so they are
// integers, in the order of x; and the sizes of the tie groups.
struct DoubledRanks {
  std::vector<int64_t> rank2;
  std::vector<int64_t> ties;
};
DoubledRanks doubled_midranks(const std::vector<double>& x) {
  const size_t m = x.size();
  std::vector<size_t> order(m);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return std::fabs(x[a]) < std::fabs(x[b]); });
  DoubledRanks r{std::vector<int64_t>(m), {}};
  for (size_t i = 0; i < m;) {
    size_t j = i;
    while (j + 1 < m && std::fabs(x[order[j + 1]]) == std::fabs(x[order[i]])) ++j;
    // Ranks i + 1 .. j + 1 share (i + 1 + j + 1) / 2; doubled: i + j + 2.
    for (size_t k = i; k <= j; ++k) r.rank2[order[k]] = int64_t(i + j + 2);
    r.ties.push_back(int64_t(j - i + 1));
    i = j + 1;
  }
  return r;
}

// Two-sided p of the doubled statistic s2 under the exact null: the count of sign choices giving
// each sum of doubled ranks, by the recursion N_k(x) = N_{k-1}(x) + N_{k-1}(x - r_k). Counts reach
// 2^m <= 2^50, exact in a double.
double exact_wilcoxon_p(const std::vector<int64_t>& rank2, int64_t s2) {
  const int64_t total = std::accumulate(rank2.begin(), rank2.end(), int64_t{0});
  std::vector<double> count(size_t(total) + 1, 0.0);
  count[0] = 1.0;
  int64_t reach = 0;
  for (int64_t r : rank2) {
    for (int64_t x = reach; x >= 0; --x) count[size_t(x + r)] += count[size_t(x)];
    reach += r;
  }
  double below = 0, above = 0, all = 0;
  for (int64_t x = 0; x <= total; ++x) {
    all += count[size_t(x)];
    if (x <= s2) below += count[size_t(x)];
    if (x >= s2) above += count[size_t(x)];
  }
  return std::min(1.0, 2 * std::min(below, above) / all);
}

double normal_wilcoxon_p(int64_t m, double r_plus, const std::vector<int64_t>& ties) {
  const double mm = double(m);
  double tie_sum = 0;
  for (int64_t t : ties) tie_sum += double(t) * double(t) * double(t) - double(t);
  const double se = std::sqrt((mm * (mm + 1) * (2 * mm + 1) - tie_sum / 2) / 24);
  const double z = (r_plus - mm * (mm + 1) / 4) / se;
  return 2 * boost::math::cdf(boost::math::complement(boost::math::normal_distribution<double>(), std::fabs(z)));
}

}  // namespace

std::optional<double> exact_p_floor(const std::vector<double>& d) {
  const auto m = int64_t(nonzero_values(d).size());
  if (m == 0) return std::nullopt;
  return std::ldexp(1.0, int(1 - std::min<int64_t>(m, 2000)));
}

std::optional<SignFlipTest> sign_flip_test(const std::vector<double>& d) {
  const auto x = nonzero_values(d);
  const auto m = int64_t(x.size());
  if (m < 3 || m > kMaxSignFlipValues || !all_finite(d)) return std::nullopt;
  double observed = 0, scale = 0;
  for (double v : x) observed += v, scale += std::fabs(v);
  const double threshold = std::fabs(observed) - 1e-12 * scale;
  // |S_s| = |S_{-s}|: enumerate the 2^(m-1) assignments with x[0] positive. Each sum is the sum of two
  // tables, over the signs of x[1..k] and of x[k+1..m-1], each entry computed afresh (no running
  // update whose round-off would grow over 2^m steps).
  const int64_t k = (m - 1) / 2;
  auto part_sums = [&](int64_t first, int64_t count, double start) {
    std::vector<double> sums(size_t{1} << count);
    for (size_t mask = 0; mask < sums.size(); ++mask) {
      double sum = start;
      for (int64_t i = 0; i < count; ++i) sum += (mask >> i & 1) ? -std::fabs(x[size_t(first + i)]) : std::fabs(x[size_t(first + i)]);
      sums[mask] = sum;
    }
    return sums;
  };
  const auto low = part_sums(1, k, std::fabs(x[0])), high = part_sums(1 + k, m - 1 - k, 0.0);
  uint64_t extreme = 0;
  for (double h : high)
    for (double l : low) extreme += std::fabs(l + h) >= threshold;
  const double half = double(low.size()) * double(high.size());
  return SignFlipTest{int64_t{1} << m, double(extreme) / half};
}

std::optional<WilcoxonTest> wilcoxon_signed_rank(const std::vector<double>& d) {
  const auto x = nonzero_values(d);
  const auto m = int64_t(x.size());
  if (m < 3 || !all_finite(d)) return std::nullopt;
  const auto ranks = doubled_midranks(x);
  int64_t r_plus2 = 0;
  for (int64_t i = 0; i < m; ++i)
    if (x[size_t(i)] > 0) r_plus2 += ranks.rank2[size_t(i)];
  WilcoxonTest w;
  w.nonzero = m, w.r_plus = double(r_plus2) / 2;
  w.exact = int64_t(d.size()) <= kWilcoxonExactMax;
  w.p_value = w.exact ? exact_wilcoxon_p(ranks.rank2, r_plus2) : normal_wilcoxon_p(m, w.r_plus, ranks.ties);
  return w;
}

}  // namespace attnlab
