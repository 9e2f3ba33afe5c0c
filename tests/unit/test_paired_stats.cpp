// The statistics behind every number of the paired report: mean, sample sd (n - 1), sign agreement,
// the paired t test, its power, the exact sign-flip and Wilcoxon signed-rank tests and Holm's
// adjustment. Expected values: hand enumerations (plain loops below), a published table of Wilcoxon
// critical values, and scipy run once (tests/data/stats/paired_tests.json, written by
// tools/make_stats_fixtures.py, which says how each number was made).
#include "support/build_paths.h"
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "attnlab/paired_stats.h"

namespace attnlab {
namespace {

TEST(PairedStats, EmptyHasNoMeanNoSdNoSign) {
  const auto s = summarize({});
  EXPECT_EQ(s.n, 0);
  EXPECT_TRUE(std::isnan(s.mean));
  EXPECT_FALSE(s.sd.has_value());
  EXPECT_EQ(s.sign, 0);
  EXPECT_EQ(s.same_sign, 0);
}

TEST(PairedStats, OneValueHasAMeanButNoSampleSd) {
  const auto s = summarize({-0.0017});
  EXPECT_EQ(s.n, 1);
  EXPECT_DOUBLE_EQ(s.mean, -0.0017);
  EXPECT_FALSE(s.sd.has_value());  // n - 1 = 0: undefined, not 0
  EXPECT_EQ(s.sign, -1);
  EXPECT_EQ(s.same_sign, 1);
}

TEST(PairedStats, SampleSdUsesNMinusOne) {
  // mean = (0.010 + 0.020 - 0.003) / 3 = 0.009
  // deviations 0.001, 0.011, -0.012; squares 1e-6 + 1.21e-4 + 1.44e-4 = 2.66e-4
  // sd = sqrt(2.66e-4 / 2) = sqrt(1.33e-4) = 0.011532562594670797
  const auto s = summarize({0.010, 0.020, -0.003});
  EXPECT_EQ(s.n, 3);
  EXPECT_NEAR(s.mean, 0.009, 1e-15);
  ASSERT_TRUE(s.sd.has_value());
  EXPECT_NEAR(*s.sd, 0.011532562594670797, 1e-15);
  EXPECT_EQ(s.sign, +1);
  EXPECT_EQ(s.same_sign, 2);  // 0.010 and 0.020; -0.003 disagrees
}

TEST(PairedStats, SdOfLossesNearFourKeepsItsDigits) {
  // Losses ~4 differing by 1e-4: the two-pass sd must not cancel.
  // mean 4.0002; deviations -1e-4, 0, 1e-4; sd = sqrt(2e-8 / 2) = 1e-4
  const auto s = summarize({4.0001, 4.0002, 4.0003});
  EXPECT_NEAR(s.mean, 4.0002, 1e-14);
  EXPECT_NEAR(*s.sd, 1e-4, 1e-12);
}

TEST(PairedStats, ZeroMeanHasSignZeroAndOnlyZerosShareIt) {
  const auto s = summarize({0.0, 1.0, -1.0});
  EXPECT_EQ(s.sign, 0);
  EXPECT_EQ(s.same_sign, 1);
  EXPECT_NEAR(*s.sd, 1.0, 1e-15);  // sqrt((0 + 1 + 1) / 2)
}

// Expected values of the paired t tests below: scipy 1.17 in the project's venv,
//   r = scipy.stats.ttest_1samp(x, 0.0); r.confidence_interval(0.95); r.pvalue
// and the seeds needed by a direct search of the smallest k >= 2 with
//   scipy.stats.t.ppf(0.975, k - 1) * x.std(ddof=1) / sqrt(k) < |x.mean()|.
// Cross-check with a printed table: t_{0.975,1} = 12.706, t_{0.975,2} = 4.303, t_{0.975,4} = 2.776.

TEST(PairedTTest, OneSeedHasNoIntervalNoPValue) {
  EXPECT_FALSE(paired_t_test(summarize({0.0212})).has_value());
  EXPECT_FALSE(paired_t_test(summarize({})).has_value());
}

TEST(PairedTTest, TwoSeedsTheDemoZeroOptionIncrement) {
  // The demo's zero-option increment, seeds +0.0562 and -0.0138: mean +0.0212, sd 0.0495.
  const auto t = paired_t_test(summarize({0.0562, -0.0138}));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->df, 1);
  EXPECT_NEAR(t->ci_low, -0.42351716576611437, 1e-12);
  EXPECT_NEAR(t->ci_high, 0.46591716576611436, 1e-12);
  EXPECT_NEAR(t->ci_high - 0.0212, 12.706 * 0.04949747468305833 / std::sqrt(2.0), 1e-4);  // the table
  ASSERT_TRUE(t->p_value.has_value());
  EXPECT_NEAR(*t->p_value, 0.653290129803758, 1e-12);
  ASSERT_TRUE(t->seeds_needed.has_value());
  EXPECT_EQ(*t->seeds_needed, 24);
}

TEST(PairedTTest, ThreeSeeds) {
  const auto t = paired_t_test(summarize({0.010, 0.020, -0.003}));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->df, 2);
  EXPECT_NEAR(t->ci_low, -0.01964847365454296, 1e-13);
  EXPECT_NEAR(t->ci_high, 0.03764847365454296, 1e-13);
  EXPECT_NEAR(*t->p_value, 0.3090537793979595, 1e-12);
  EXPECT_EQ(*t->seeds_needed, 9);
}

TEST(PairedTTest, FiveSeedsThatAgree) {
  const auto t = paired_t_test(summarize({0.012, 0.018, 0.007, 0.015, 0.011}));
  ASSERT_TRUE(t.has_value());
  EXPECT_NEAR(t->ci_low, 0.007435513570476569, 1e-13);
  EXPECT_NEAR(t->ci_high, 0.01776448642952343, 1e-13);
  EXPECT_NEAR(*t->p_value, 0.002478654732070818, 1e-12);
  EXPECT_EQ(*t->seeds_needed, 3);  // already fewer than the 5 it has: the interval excludes 0
}

TEST(PairedTTest, SeedsNeededFoundBeyondTheDoublingBracket) {
  // k = 64: t_{0.975,62} sd / sqrt(63) = 2.3401e-4 >= |mean| = 2.3333e-4 > 2.3210e-4 at k = 64.
  const auto t = paired_t_test(summarize({0.001, -0.0008, 0.0005}));
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(*t->seeds_needed, 64);
  EXPECT_NEAR(*t->p_value, 0.7060276321039345, 1e-12);
}

TEST(PairedTTest, IdenticalDifferencesHaveAZeroWidthInterval) {
  const auto t = paired_t_test(summarize({0.01, 0.01, 0.01}));
  ASSERT_TRUE(t.has_value());
  EXPECT_DOUBLE_EQ(t->ci_low, 0.01);
  EXPECT_DOUBLE_EQ(t->ci_high, 0.01);
  EXPECT_EQ(*t->p_value, 0.0);  // scipy: t = inf, p = 0
  EXPECT_EQ(*t->seeds_needed, 2);
  const auto zero = paired_t_test(summarize({0.0, 0.0}));
  ASSERT_TRUE(zero.has_value());
  EXPECT_FALSE(zero->p_value.has_value());  // 0 / 0 (scipy: nan)
  EXPECT_FALSE(zero->seeds_needed.has_value());
}

TEST(PairedTTest, ZeroMeanNeedsNoFiniteNumberOfSeeds) {
  const auto t = paired_t_test(summarize({0.01, -0.01}));
  ASSERT_TRUE(t.has_value());
  EXPECT_NEAR(*t->p_value, 1.0, 1e-15);
  EXPECT_FALSE(t->seeds_needed.has_value());
}

TEST(PairedTTest, ATinyMeanNeedsManySeedsAndStaysFinite) {
  // |mean| / sd = 1e-6: about (1.96e6)^2 = 3.8e12 seeds.
  const auto t = paired_t_test(summarize({1.0 + 1e-6, -1.0 + 1e-6}));
  ASSERT_TRUE(t.has_value());
  ASSERT_TRUE(t->seeds_needed.has_value());
  const double z = 1.959963984540054, sd = std::sqrt(2.0);
  EXPECT_NEAR(double(*t->seeds_needed), std::pow(z * sd / 1e-6, 2), 1e-5 * std::pow(z * sd / 1e-6, 2));
}

TEST(PairedTTest, SeedsForPowerAtTheEdges) {
  // sd = 0 with a non-zero mean: power 1 at two seeds; mean 0: power stays at alpha, no n suffices.
  EXPECT_EQ(*paired_t_test(summarize({0.01, 0.01, 0.01}))->seeds_for_power, 2);
  EXPECT_FALSE(paired_t_test(summarize({0.01, -0.01}))->seeds_for_power.has_value());
  EXPECT_FALSE(paired_t_test(summarize({0.0, 0.0}))->seeds_for_power.has_value());
  // |mean| / sd = 1e-6: about (z_0.975 + z_0.8)^2 / 1e-12 = 7.85e12 seeds, found and finite.
  const auto tiny = paired_t_test(summarize({1.0 + 1e-6, -1.0 + 1e-6}));
  const double normal = std::pow(1.959963984540054 + 0.8416212335729143, 2) * 2 / 1e-12;  // sd = sqrt(2)
  EXPECT_NEAR(double(*tiny->seeds_for_power), normal, 1e-4 * normal);
  EXPECT_EQ(paired_t_power(std::numeric_limits<double>::infinity(), 2), 1.0);
  EXPECT_NEAR(paired_t_power(0.0, 5), 0.05, 1e-12);  // no effect: the test's level
  EXPECT_THROW(paired_t_power(1.0, 1), std::invalid_argument);
  EXPECT_THROW(paired_t_power(-1.0, 3), std::invalid_argument);
  EXPECT_THROW(paired_t_power(std::nan(""), 3), std::invalid_argument);
}

// ---- Exact sign-flip test ----

// The two-sided sign-flip p-value of k_1..k_n (integers, so the sums are exact) by a plain loop over
// all 2^n sign assignments, counting |sum| >= |observed sum|.
double enumerated_sign_flip_p(const std::vector<int64_t>& k) {
  int64_t observed = 0;
  for (auto v : k) observed += v;
  const uint64_t all = uint64_t{1} << k.size();
  uint64_t extreme = 0;
  for (uint64_t mask = 0; mask < all; ++mask) {
    int64_t sum = 0;
    for (size_t i = 0; i < k.size(); ++i) sum += (mask >> i & 1) ? -std::llabs(k[i]) : std::llabs(k[i]);
    extreme += std::llabs(sum) >= std::llabs(observed);
  }
  return double(extreme) / double(all);
}

std::vector<double> scaled(const std::vector<int64_t>& k, double unit) {
  std::vector<double> d;
  for (auto v : k) d.push_back(double(v) * unit);
  return d;
}

TEST(SignFlipTest, FiveSeedsByHand) {
  // 0.0120, 0.0180, 0.0070, 0.0150, 0.0110: all positive, no other assignment reaches the sum 0.063,
  // so only it and its mirror count: p = 2 / 32.
  const auto t = sign_flip_test({0.012, 0.018, 0.007, 0.015, 0.011});
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->assignments, 32);
  EXPECT_DOUBLE_EQ(t->p_value, 0.0625);
  // 0.0131, 0.0072, -0.0044, 0.0210, 0.0093, 0.0158 (sum 0.0620): flipping any one value v changes the
  // sum by 2|v|; |sum| >= 0.062 only for the observed signs, flipping -0.0044 (sum 0.0708) and their
  // mirrors: p = 4 / 64.
  EXPECT_DOUBLE_EQ(sign_flip_test({0.0131, 0.0072, -0.0044, 0.0210, 0.0093, 0.0158})->p_value, 4.0 / 64);
}

TEST(SignFlipTest, EqualsAPlainLoopOverEverySignAssignment) {
  // Differences in units of 1e-4 nats (4-decimal losses), n = 3..12, random signs and ties.
  std::mt19937_64 rng(23);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = 3 + trial % 10;
    std::vector<int64_t> k;
    for (size_t i = 0; i < n; ++i) k.push_back(int64_t(rng() % 41) - 20);
    if (std::count_if(k.begin(), k.end(), [](int64_t v) { return v != 0; }) < 3) continue;
    const auto t = sign_flip_test(scaled(k, 1e-4));
    ASSERT_TRUE(t.has_value());
    EXPECT_DOUBLE_EQ(t->p_value, enumerated_sign_flip_p(k)) << "trial " << trial;
  }
}

TEST(SignFlipTest, SumsEqualInExactArithmeticTieDespiteRoundOff) {
  // 0.3 + 0.1 + 0.2 - 0.6 is 0 exactly but not in doubles, so assignments that flip {0.3, 0.1, 0.2,
  // -0.6} have the observed |sum| 1.7 only in exact arithmetic; they must count. The plain loop on
  // integers gives 9 / 32; comparing the double sums without a tolerance counts 8 / 32.
  const std::vector<int64_t> k = {3, 1, 2, -6, 9, 8};
  ASSERT_DOUBLE_EQ(enumerated_sign_flip_p(k), 9.0 / 32);
  EXPECT_DOUBLE_EQ(sign_flip_test({0.3, 0.1, 0.2, -0.6, 0.9, 0.8})->p_value, 9.0 / 32);
  // The same at the smallest observed |sum|: every assignment ties or exceeds 0.05, p = 1 (14 / 16
  // without a tolerance).
  ASSERT_DOUBLE_EQ(enumerated_sign_flip_p({30, -10, -20, 5}), 1.0);
  EXPECT_DOUBLE_EQ(sign_flip_test({0.3, -0.1, -0.2, 0.05})->p_value, 1.0);
}

TEST(SignFlipTest, ZerosChangeNothingAndTwentyFourValuesAreEnumerated) {
  EXPECT_DOUBLE_EQ(sign_flip_test({0.0, 0.012, 0.0, 0.018, 0.007})->p_value, 0.25);  // as {0.012, 0.018, 0.007}
  // 24 differences of 1e-4 nats, 5 of them negative: an assignment is as extreme when it has at most 5
  // or at least 19 negative signs, p = 2 sum_{j <= 5} C(24, j) / 2^24.
  std::vector<double> d(size_t(kMaxSignFlipValues), 1e-4);
  for (size_t i : {0, 3, 11, 17, 22}) d[i] = -1e-4;
  double binomial = 1, extreme = 0;
  for (int j = 0; j <= 5; ++j) extreme += binomial, binomial = binomial * double(24 - j) / double(j + 1);
  const auto t = sign_flip_test(d);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->assignments, int64_t{1} << 24);
  EXPECT_DOUBLE_EQ(t->p_value, 2 * extreme / std::ldexp(1.0, 24));
  d.push_back(1e-4);
  EXPECT_FALSE(sign_flip_test(d).has_value());  // 2^25: not enumerated
}

TEST(ExactTests, NoPValueBelowThreeNonZeroDifferences) {
  // One seed: nothing to flip. Two: p could only be 0.5 or 1 (the floor 2^(1-2)); a zero adds nothing.
  for (const auto& d : std::vector<std::vector<double>>{{}, {0.01}, {0.0562, -0.0138}, {0.01, 0.02}, {0.0, 0.005, 0.003},
                                                          {0.0, 0.0, 0.0}}) {
    EXPECT_FALSE(sign_flip_test(d).has_value()) << d.size();
    EXPECT_FALSE(wilcoxon_signed_rank(d).has_value()) << d.size();
  }
  EXPECT_FALSE(exact_p_floor({}).has_value());
  EXPECT_FALSE(exact_p_floor({0.0, 0.0}).has_value());
  EXPECT_EQ(*exact_p_floor({0.01}), 1.0);
  EXPECT_EQ(*exact_p_floor({0.0562, -0.0138}), 0.5);
  EXPECT_EQ(*exact_p_floor({0.0, 0.005, 0.003}), 0.5);
  EXPECT_EQ(*exact_p_floor({0.01, 0.02, 0.03}), 0.25);
  EXPECT_EQ(*exact_p_floor({0.01, 0.02, 0.03, 0.04, 0.05}), 0.0625);
}

TEST(ExactTests, NonFiniteDifferencesHaveNoPValue) {
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity()}) {
    EXPECT_FALSE(sign_flip_test({0.01, 0.02, bad}).has_value());
    EXPECT_FALSE(wilcoxon_signed_rank({0.01, 0.02, bad, 0.03}).has_value());
  }
}

// ---- Wilcoxon signed-rank test ----

TEST(WilcoxonTest, MidranksAndZerosByHand) {
  // 0.01, -0.01, 0.02, 0.02, 0.03: |d| ranks 1.5, 1.5, 3.5, 3.5, 5; R+ = 1.5 + 3.5 + 3.5 + 5 = 13.5.
  const auto w = wilcoxon_signed_rank({0.01, -0.01, 0.02, 0.02, 0.03});
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->nonzero, 5);
  EXPECT_DOUBLE_EQ(w->r_plus, 13.5);
  EXPECT_TRUE(w->exact);
  // Doubled ranks 3, 3, 7, 7, 10 (total 30): sums >= 27 (doubled 13.5) come from subsets omitting at
  // most 3: {} and each single 3 -> 3 of 32; two-sided p = 6 / 32.
  EXPECT_DOUBLE_EQ(w->p_value, 6.0 / 32);
  // Zeros are dropped: 0, 0.004, -0.002, 0.006, 0, 0.009 ranks as 0.004, -0.002, 0.006, 0.009:
  // R+ = 2 + 3 + 4 = 9 of 10; P(R+ >= 9) = 2 / 16 (subsets {2,3,4}, {1,2,3,4}): p = 0.25.
  const auto z = wilcoxon_signed_rank({0.0, 0.004, -0.002, 0.006, 0.0, 0.009});
  EXPECT_EQ(z->nonzero, 4);
  EXPECT_DOUBLE_EQ(z->r_plus, 9.0);
  EXPECT_DOUBLE_EQ(z->p_value, 0.25);
}

// Critical values T of the two-sided Wilcoxon signed-rank test at level 0.05, n = 6..30: the largest T
// with P(min(R+, R-) <= T) <= 0.05, from the published table of OEIS A226330 ("Critical values of
// Wilcoxon T test at a 2.5% level of significance (one-tail test)", after P. Mitic, The Mathematica
// Journal 6(3), 1996), which the University of York's table "Critical Values for T in the Wilcoxon
// Matched-Pairs Signed-Rank Test" (www.york.ac.uk/depts/maths/tables/wilcoxon.htm, column P = 0.05)
// prints identically for n = 6..25. (Some other online tables print 4, 6, 11, 14, 30, 35 at n = 8, 9,
// 11, 12, 16, 17: they give the smallest T that is not significant.)
TEST(WilcoxonTest, ReproducesThePublishedCriticalValues) {
  const int64_t critical[] = {0,  2,  3,  5,  8,  10, 13, 17,  21,  25,  29,  34, 40,
                              46, 52, 58, 65, 73, 81, 89, 98, 107, 116, 126, 137};
  for (int64_t n = 6; n <= 30; ++n) {
    // d_i = i (rank i), with ranks summing to T negated (largest first), so R- = T <= R+.
    auto data = [&](int64_t T) {
      std::vector<double> d;
      for (int64_t i = 1; i <= n; ++i) d.push_back(double(i));
      for (int64_t i = n; i >= 1 && T > 0; --i)
        if (i <= T) d[size_t(i - 1)] = -double(i), T -= i;
      return d;
    };
    const int64_t T = critical[n - 6];
    const auto at = wilcoxon_signed_rank(data(T)), above = wilcoxon_signed_rank(data(T + 1));
    EXPECT_DOUBLE_EQ(at->r_plus, double(n * (n + 1) / 2 - T)) << n;
    EXPECT_LE(at->p_value, 0.05) << "n " << n << ", T " << T;
    EXPECT_GT(above->p_value, 0.05) << "n " << n << ", T " << T + 1;
  }
}

TEST(WilcoxonTest, NormalApproximationOnlyBeyondFiftyDifferences) {
  std::vector<double> d;
  for (int64_t i = 1; i <= kWilcoxonExactMax; ++i) d.push_back(double(i % 7 == 0 ? -i : i));
  EXPECT_TRUE(wilcoxon_signed_rank(d)->exact);
  d.push_back(0.0);  // scipy counts zeros in n when it chooses the method
  EXPECT_FALSE(wilcoxon_signed_rank(d)->exact);
}

// ---- Against scipy (tests/data/stats/paired_tests.json) ----

nlohmann::json stats_fixture() {
  std::ifstream in((attnlab::test::source_dir().string() + "/tests/data/stats/paired_tests.json"));
  if (!in) throw std::runtime_error("cannot read tests/data/stats/paired_tests.json");
  return nlohmann::json::parse(in);
}

TEST(PairedTestsVsScipy, EveryCaseOfTheFixture) {
  const auto fixture = stats_fixture();
  ASSERT_GE(fixture["cases"].size(), 10u);
  for (const auto& c : fixture["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto d = c["d"].get<std::vector<double>>();
    const auto tests = paired_tests(d, summarize(d));
    ASSERT_TRUE(tests.t && tests.t->p_value);
    EXPECT_NEAR(*tests.t->p_value, c["t_p"].get<double>(), 1e-12);
    const bool testable = c["nonzero"].get<int64_t>() >= 3;  // below: n/a by design (floor >= 0.5)
    ASSERT_EQ(tests.wilcoxon.has_value(), testable);
    ASSERT_EQ(tests.sign_flip.has_value(), testable && !c["sign_flip_p"].is_null());
    if (tests.sign_flip) {
      EXPECT_NEAR(tests.sign_flip->p_value, c["sign_flip_p"].get<double>(), 1e-14);
    }
    if (!tests.wilcoxon) continue;
    EXPECT_EQ(tests.wilcoxon->nonzero, c["nonzero"].get<int64_t>());
    EXPECT_DOUBLE_EQ(tests.wilcoxon->r_plus, c["r_plus"].get<double>());
    EXPECT_EQ(tests.wilcoxon->exact, int64_t(d.size()) <= kWilcoxonExactMax);
    EXPECT_NEAR(tests.wilcoxon->p_value, c["wilcoxon_p"].get<double>(), 1e-12);
  }
}

TEST(PairedTestsVsScipy, PowerAndSeedsForEightyPercentPower) {
  const auto fixture = stats_fixture();
  ASSERT_EQ(fixture["alpha"].get<double>(), kPowerAlpha);
  ASSERT_EQ(fixture["power_target"].get<double>(), kPowerTarget);
  for (const auto& c : fixture["power"]) {
    const double e = c["effect_size"].get<double>();
    SCOPED_TRACE("effect size " + std::to_string(e));
    for (const auto& point : c["power_at"]) {
      const auto m = point[0].get<int64_t>();
      const double power = paired_t_power(e, m);
      EXPECT_NEAR(power, point[2].get<double>(), 1e-9) << m;      // the integral over chi-square
      if (!point[1].is_null()) {
        EXPECT_NEAR(power, point[1].get<double>(), 1e-9) << m;  // scipy.stats.nct
      }
    }
    // Two seeds with mean e and sd 1: e + 1/sqrt(2) and e - 1/sqrt(2).
    const auto t = paired_t_test(summarize({e + std::sqrt(0.5), e - std::sqrt(0.5)}));
    ASSERT_TRUE(t && t->seeds_for_power);
    EXPECT_EQ(*t->seeds_for_power, c["seeds_for_power"].get<int64_t>());
  }
}

// ---- Holm ----

TEST(Holm, AHandExample) {
  // Present p: 0.01, 0.04, 0.03, 0.005 (m = 4). Ascending: 0.005 x 4 = 0.02; 0.01 x 3 = 0.03;
  // 0.03 x 2 = 0.06; 0.04 x 1 = 0.04, raised to the running maximum 0.06.
  const auto a = holm_adjust({0.01, 0.04, std::nullopt, 0.03, 0.005});
  ASSERT_EQ(a.size(), 5u);
  EXPECT_NEAR(*a[0], 0.03, 1e-15);
  EXPECT_NEAR(*a[1], 0.06, 1e-15);
  EXPECT_FALSE(a[2].has_value());  // not in the family
  EXPECT_NEAR(*a[3], 0.06, 1e-15);
  EXPECT_NEAR(*a[4], 0.02, 1e-15);
  // Capped at 1; equal p-values get equal adjustments; one p is its own adjustment; NaN stays out.
  const auto b = holm_adjust({0.6, 0.7, 0.2, 0.2});
  EXPECT_EQ(*b[0], 1.0);
  EXPECT_EQ(*b[1], 1.0);
  EXPECT_NEAR(*b[2], 0.8, 1e-15);
  EXPECT_NEAR(*b[3], 0.8, 1e-15);
  EXPECT_EQ(*holm_adjust({0.37})[0], 0.37);
  const auto c = holm_adjust({std::nan(""), 0.02, 0.01});
  EXPECT_FALSE(c[0].has_value());
  EXPECT_NEAR(*c[1], 0.02, 1e-15);  // m = 2: 0.01 x 2, 0.02 x 1 -> max(0.02, 0.02)
  EXPECT_NEAR(*c[2], 0.02, 1e-15);
  EXPECT_TRUE(holm_adjust({}).empty());
}

TEST(PairedStats, SignOf) {
  EXPECT_EQ(sign_of(0.5), 1);
  EXPECT_EQ(sign_of(-1e-300), -1);
  EXPECT_EQ(sign_of(0.0), 0);
}

}  // namespace
}  // namespace attnlab
