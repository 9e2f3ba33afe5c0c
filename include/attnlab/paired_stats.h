// Statistics of paired-seed differences (SPEC section 3): mean over seeds, sample standard deviation,
// how many seeds share the mean's sign, the paired t analysis (95% interval, two-sided p-value, seeds
// needed for the interval to exclude 0 and for 80% power), and its companions that do not assume
// normality: the exact sign-flip permutation test and the Wilcoxon signed-rank test; Holm's adjustment
// across the contrasts of one table. Kept apart from the report so the arithmetic is tested on its
// own; the report only chooses which numbers go in. docs/sweeps.md ("Statistics") states every
// formula and where it comes from.
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

/// The two-sided level and the power of the planning figure PairedTTest::seeds_for_power.
constexpr double kPowerAlpha = 0.05;
constexpr double kPowerTarget = 0.8;

/// The paired t analysis of n differences d_1..d_n (one per seed), testing mean = 0 with Student's t
/// on n - 1 degrees of freedom (quantiles and tails from Boost.Math). With se = sd / sqrt(n):
///   interval  mean -+ t_{0.975, n-1} se
///   p-value   2 P(T_{n-1} > |mean| / se)
///   seeds     the smallest m >= 2 with t_{0.975, m-1} sd / sqrt(m) < |mean|: how many seeds an
///             interval at the observed sd would need to exclude 0 (half-width below |mean|)
///   power     the smallest m >= 2 with paired_t_power(|mean| / sd, m) >= kPowerTarget: how many
///             seeds a two-sided paired t test at level kPowerAlpha would need to reject mean = 0 with
///             probability 0.8 if the true mean and sd were the observed ones (a plug-in figure)
struct PairedTTest {
  int64_t df = 0;                   ///< n - 1
  double ci_low = 0, ci_high = 0;   ///< the 95% interval of the mean (same unit as the values)
  std::optional<double> p_value;    ///< none when sd = 0 and mean = 0 (0/0)
  std::optional<int64_t> seeds_needed;     ///< none when mean = 0 (no n suffices)
  std::optional<int64_t> seeds_for_power;  ///< none when mean = 0, or when the search passes 2^62 seeds
};

/// The test of `s` (from summarize()). std::nullopt when s.n < 2 (no sd, so no interval). With
/// sd = 0 the interval is [mean, mean], p = 0 (mean != 0) and 2 seeds suffice for both seed counts.
/// Never throws.
std::optional<PairedTTest> paired_t_test(const SampleStats& s);

/// The power of the two-sided paired t test at level kPowerAlpha with m seeds when the true mean
/// difference is `effect_size` standard deviations (|mean| / sd, >= 0): with df = m - 1, critical value
/// c = t_{1 - alpha/2, df} and T' noncentral t with df degrees of freedom and noncentrality
/// sqrt(m) effect_size, power = P(T' > c) + P(T' < -c) (Cohen 1988, Statistical Power Analysis for the
/// Behavioral Sciences, ch. 2; the noncentral t from Boost.Math, boost/math/distributions/non_central_t.hpp).
/// Throws std::invalid_argument for m < 2 or a negative or NaN effect size; +inf gives 1.
double paired_t_power(double effect_size, int64_t m);

/// The exact sign-flip permutation test of mean = 0 (Fisher 1935, The Design of Experiments, on
/// Darwin's paired Zea mays plants; scipy.stats.permutation_test with permutation_type='samples' and
/// the mean as statistic is the same test). Under the null each difference is as likely to be +|d_i| as -|d_i|, so the observed sum
/// S = sum d_i is compared with the sums S_s = sum s_i |d_i| over all 2^m sign assignments s of the m
/// non-zero differences (a zero difference adds nothing to any sum, so zeros change no p-value):
///   p = #{s : |S_s| >= |S| - tol} / 2^m,   tol = 1e-12 sum |d_i|
/// two-sided, counting ties of |mean| as at least as extreme; tol absorbs the round-off of two sums of
/// up to kMaxSignFlipValues terms (at most about 1e-14 sum |d_i|), so assignments whose sums are equal
/// in exact arithmetic tie. (scipy's tolerance is relative to |S| instead, which misses ties when a
/// subset of the d_i sums to 0.) The observed assignment and its mirror image always count, so
/// p >= 2^(1-m) (exact_p_floor()).
struct SignFlipTest {
  int64_t assignments = 0;  ///< 2^m sign assignments enumerated
  double p_value = 1.0;     ///< two-sided
};

/// At most this many non-zero differences are enumerated (2^24 sign assignments, about 10 ms).
constexpr int64_t kMaxSignFlipValues = 24;

/// The test of `d` (one difference per seed). std::nullopt when fewer than 3 differences are non-zero
/// (the p-value could only be 0.5 or 1: exact_p_floor() >= 0.5), when more than kMaxSignFlipValues
/// are, or when a value is not finite. Never throws.
std::optional<SignFlipTest> sign_flip_test(const std::vector<double>& d);

/// The Wilcoxon signed-rank test of a zero median difference (Wilcoxon 1945, Biometrics Bulletin
/// 1(6):80-83), as scipy.stats.wilcoxon does it by default (scipy 1.17: zero_method="wilcox",
/// correction=False, method="auto"):
/// - zeros: differences exactly 0 are dropped before ranking (Wilcoxon's rule, not Pratt's); m counts
///   the rest;
/// - ties: equal |d_i| (compared exactly, as scipy's rankdata does) share their midrank;
/// - statistic: R+ = the sum of the (mid)ranks of the positive differences;
/// - exact (n <= kWilcoxonExactMax, n counting zeros as scipy does): the null distribution of R+ is
///   that of sum_i s_i r_i over the 2^m equally likely sign choices s_i in {0, 1}, counted by the
///   recursion N_k(x) = N_{k-1}(x) + N_{k-1}(x - r_k) over the ranks (the generating function
///   prod_k (1 + x^{r_k})), on doubled ranks so that midranks are integers; with ties this is the
///   conditional distribution given the midranks, which scipy enumerates by permutation for n <= 13.
///   p = min(1, 2 min(P(R+ <= observed), P(R+ >= observed)));
/// - normal approximation (n > kWilcoxonExactMax): z = (R+ - m(m+1)/4) / sqrt((m(m+1)(2m+1) -
///   sum_t (t^3 - t)/2) / 24) over tie groups of size t, no continuity correction, p = 2 P(Z > |z|).
/// The one difference from scipy's default: with ties or zeros and 13 < n <= 50 scipy switches to the
/// normal approximation; here the distribution stays exact.
struct WilcoxonTest {
  int64_t nonzero = 0;   ///< m: the differences ranked
  double r_plus = 0;     ///< R+, the sum of the midranks of the positive differences
  bool exact = true;     ///< false: the normal approximation
  double p_value = 1.0;  ///< two-sided
};

/// Up to this many differences (zeros included) the Wilcoxon p-value is exact.
constexpr int64_t kWilcoxonExactMax = 50;

/// The test of `d`. std::nullopt when fewer than 3 differences are non-zero (exact_p_floor() >= 0.5)
/// or a value is not finite. Never throws.
std::optional<WilcoxonTest> wilcoxon_signed_rank(const std::vector<double>& d);

/// The smallest two-sided p-value the exact sign-flip and signed-rank tests can give for `d`:
/// 2^(1-m) with m non-zero differences (only the observed signs and their mirror image are as
/// extreme as all-positive ones): 0.5 at m = 2, 0.25 at 3, 0.125 at 4, 0.0625 at 5. None for m = 0.
std::optional<double> exact_p_floor(const std::vector<double>& d);

/// Holm's step-down adjustment of a family of p-values for the family-wise error rate (Holm 1979,
/// Scandinavian Journal of Statistics 6:65-70): with the m present p-values in ascending order
/// p_(1) <= ... <= p_(m), the adjusted p_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)). Absent
/// entries (and NaN ones) are not part of the family and come back absent; the output has the input's
/// order. Never throws.
std::vector<std::optional<double>> holm_adjust(const std::vector<std::optional<double>>& p);

/// Every per-contrast figure of one set of paired differences (one per seed): the summary, the paired
/// t analysis and its two distribution-free companions. What needs the other contrasts of a table
/// (Holm's adjustment) is computed by the report (report.h), beside these.
struct PairedTests {
  std::optional<PairedTTest> t;           ///< paired_t_test()
  std::optional<SignFlipTest> sign_flip;  ///< sign_flip_test()
  std::optional<WilcoxonTest> wilcoxon;   ///< wilcoxon_signed_rank()
  std::optional<double> exact_p_floor;    ///< exact_p_floor()
};

/// The tests of `d`, whose summary is `s` (summarize(d)). Never throws.
PairedTests paired_tests(const std::vector<double>& d, const SampleStats& s);

}  // namespace attnlab
