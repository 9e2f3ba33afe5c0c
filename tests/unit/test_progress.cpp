// Progress lines of long commands and the sweep's ETA: values checked against hand arithmetic on a
// fake clock, so nothing here depends on how fast the machine is.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "attnlab/progress.h"
#include "attnlab/sweep.h"

namespace attnlab {
namespace {

struct FakeTime {
  double now = 100.0;  // an arbitrary origin: only differences matter
};

TEST(FormatDuration, MinutesBelowAnHourHoursFromThereAndUnknown) {
  EXPECT_EQ(format_duration(0.0), "0m00s");
  EXPECT_EQ(format_duration(65.9), "1m05s");
  EXPECT_EQ(format_duration(3599.0), "59m59s");
  EXPECT_EQ(format_duration(3600.0 * 2 + 3 * 60 + 59), "2h03m");
  EXPECT_EQ(format_duration(std::nan("")), "?");
  EXPECT_EQ(format_duration(-1.0), "?");
}

TEST(Progress, LinesCarryCountPercentElapsedAndTheMeanRateEta) {
  FakeTime t;
  std::vector<std::string> lines;
  Progress p("probe runs/sl", "batches", true, 0.0, [&](const std::string& l) { lines.push_back(l); },
             [&] { return t.now; });
  p.add_total(8);
  EXPECT_TRUE(std::isnan(p.eta_seconds()));
  t.now += 6.0;
  p.advance(2);  // 3 s per batch: 6 left -> 18 s
  EXPECT_DOUBLE_EQ(p.eta_seconds(), 18.0);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "probe runs/sl: 2 of 8 batches (25%), 0m06s elapsed, ETA 0m18s");
  t.now += 74.0;
  p.advance(6);
  EXPECT_EQ(p.eta_seconds(), 0.0);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], "probe runs/sl: 8 of 8 batches (100%), 1m20s elapsed");  // no ETA once done
}

TEST(Progress, AtMostOneLinePerIntervalButAlwaysTheLast) {
  FakeTime t;
  std::vector<std::string> lines;
  Progress p("inject", "forward passes", true, 2.0, [&](const std::string& l) { lines.push_back(l); },
             [&] { return t.now; });
  p.add_total(5);
  for (int i = 0; i < 3; ++i) {
    t.now += 0.5;
    p.advance();
  }
  EXPECT_TRUE(lines.empty());  // 1.5 s: the 2 s interval has not passed since the start
  t.now += 0.5;
  p.advance();  // 2.0 s: due
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "inject: 4 of 5 forward passes (80%), 0m02s elapsed, ETA 0m00s");
  t.now += 0.25;
  p.advance();  // the last one, whatever the interval
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], "inject: 5 of 5 forward passes (100%), 0m02s elapsed");
}

TEST(Progress, TheTotalMayGrowAndDisabledWritesNothing) {
  FakeTime t;
  int writes = 0;
  Progress off("x", "items", false, 0.0, [&](const std::string&) { ++writes; }, [&] { return t.now; });
  off.add_total(2);
  off.advance(2);
  EXPECT_EQ(writes, 0);
  EXPECT_EQ(off.done(), 2);  // still counted

  std::vector<std::string> lines;
  Progress grow("activations", "checkpoints", true, 0.0, [&](const std::string& l) { lines.push_back(l); },
                [&] { return t.now; });
  grow.add_total(1);
  t.now += 10.0;
  grow.advance();
  grow.add_total(3);  // another run's checkpoints become known
  EXPECT_EQ(grow.total(), 4);
  EXPECT_DOUBLE_EQ(grow.eta_seconds(), 30.0);
  EXPECT_THROW(grow.add_total(-1), std::invalid_argument);
  EXPECT_FALSE(progress_wanted(true));  // --quiet wins whatever stderr is
}

TEST(SweepEta, QueuedWorkAndWhatActiveRunsHaveLeftOverTheBusyWorkers) {
  // 2 workers, mean 60 s: 3 queued (180 s) + active runs at 20 s and 70 s (40 s and 0 s left) = 220 s
  // of work over min(2, 5) workers.
  EXPECT_DOUBLE_EQ(sweep_eta_seconds(60.0, 3, {20.0, 70.0}, 2), 110.0);
  // The last run alone on one of four workers: what it has left of the mean.
  EXPECT_DOUBLE_EQ(sweep_eta_seconds(60.0, 0, {45.0}, 4), 15.0);
  EXPECT_EQ(sweep_eta_seconds(60.0, 0, {}, 2), 0.0);
  EXPECT_TRUE(std::isnan(sweep_eta_seconds(std::nan(""), 2, {5.0}, 2)));  // no run finished yet
}

}  // namespace
}  // namespace attnlab
