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

TEST(PairedStats, SignOf) {
  EXPECT_EQ(sign_of(0.5), 1);
  EXPECT_EQ(sign_of(-1e-300), -1);
  EXPECT_EQ(sign_of(0.0), 0);
}

}  // namespace
}  // namespace attnlab
