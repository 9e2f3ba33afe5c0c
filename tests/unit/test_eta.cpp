// The trainer's ETA: a windowed mean of whole step intervals (evaluation and checkpoint included),
// with the loop's warm-up interval dropped once a second one exists.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "attnlab/eta.h"

namespace attnlab {
namespace {

TEST(EtaEstimator, NothingRecordedHasNoRate) {
  EtaEstimator eta(10);
  EXPECT_TRUE(std::isnan(eta.seconds_per_step()));
  EXPECT_TRUE(std::isnan(eta.remaining_seconds(5)));
  EXPECT_EQ(eta.remaining_seconds(0), 0.0);
}

TEST(EtaEstimator, TheFirstIntervalAloneIsUsedThenDropped) {
  EtaEstimator eta(10);
  eta.record(9.0);  // warm-up
  EXPECT_DOUBLE_EQ(eta.seconds_per_step(), 9.0);
  EXPECT_DOUBLE_EQ(eta.remaining_seconds(4), 36.0);
  eta.record(1.0);
  EXPECT_DOUBLE_EQ(eta.seconds_per_step(), 1.0);  // (9 dropped)
  eta.record(2.0);
  EXPECT_DOUBLE_EQ(eta.seconds_per_step(), 1.5);
}

TEST(EtaEstimator, PeriodicEvaluationsAreAmortisedNotFollowed) {
  // Steps of 1 s with a 4 s evaluation every 4th step: 8 s per 4 steps, 2 s per step.
  EtaEstimator eta(4);
  eta.record(1.0);  // warm-up, dropped below
  for (int step = 1; step <= 40; ++step) {
    eta.record(step % 4 == 0 ? 5.0 : 1.0);
    if (step >= 4) {
      EXPECT_DOUBLE_EQ(eta.seconds_per_step(), 2.0) << "step " << step;  // the last 4 hold one evaluation
      EXPECT_DOUBLE_EQ(eta.remaining_seconds(100), 200.0);
    }
  }
}

TEST(EtaEstimator, OnlyTheWindowCounts) {
  EtaEstimator eta(3);
  for (double s : {100.0, 50.0, 50.0, 50.0, 2.0, 2.0, 2.0}) eta.record(s);
  EXPECT_DOUBLE_EQ(eta.seconds_per_step(), 2.0);  // the slow phase left the window
}

TEST(EtaEstimator, AWindowBelowOneIsRefused) {
  EXPECT_THROW(EtaEstimator(0), std::invalid_argument);
}

}  // namespace
}  // namespace attnlab
