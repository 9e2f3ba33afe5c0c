// The statistics behind every number of the paired report: mean, sample sd (n - 1), sign agreement.
#include <gtest/gtest.h>

#include <cmath>

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

TEST(PairedStats, SignOf) {
  EXPECT_EQ(sign_of(0.5), 1);
  EXPECT_EQ(sign_of(-1e-300), -1);
  EXPECT_EQ(sign_of(0.0), 0);
}

}  // namespace
}  // namespace attnlab
