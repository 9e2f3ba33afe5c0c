// Data-parallel training end to end (docs/distributed.md): the micro tier's model on hand-made
// shards, trained by the real `attnlab` binary as two Gloo ranks of one thread each, against one
// process trained in this test. Per-step losses, gradient norms, validation losses and final weights
// agree to 1e-6 (the all-reduce adds in another order than one process does); a job resumes across
// world sizes; a killed rank, a NaN loss and ranks that disagree end the job with an error, never a
// hang: every child runs under a deadline and is killed (failing the test) past it.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <thread>

#include "attnlab/trainer.h"
#include "attnlab/run_dir.h"
#include "e2e/rank_processes.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using testing::Clock;
using testing::read;
using testing::wait_until;

constexpr auto kDeadline = testing::kJobDeadline;

int run_cli(const std::vector<std::string>& args, const fs::path& log) { return testing::run_job(args, log); }

using DistributedTrain = testing::DistributedJob;

// The data order is a function of (step, index in the global batch): 8 x 1 and 2 x 4 micro-batches
// train on the same sequences, so only float rounding separates them. Losses, gradient norms and
// validation losses agree to 4e-6: a loss near 8 nats is an fp32 mean whose last bit is 9.5e-7, and
// means over micro-batches of another size round otherwise (1.4e-6 apart, and gradient norms 2.4e-7,
// at the demo's first step). The weights agree to 1e-4 (lr / 30): micro-batches of another size
// run GEMMs of other shapes, whose fp32 sums round differently; where a weight's gradient is a
// near-cancelling sum, small next to its terms, that rounding is a large fraction of it, and AdamW's
// normalisation m / (sqrt(v) + eps) turns it into a visible fraction of lr (up to 1.5e-5 seen after
// 4 steps at lr 3e-3). The two-rank test below, whose ranks run the same shapes, agrees to 1e-6.
TEST_F(DistributedTrain, MicroBatchSplitDoesNotChangeTheRun) {
  train(config("whole", {"train.batch_size=8"}));
  train(config("quarters", {"train.batch_size=2"}));
  expect_same_run(run("whole"), run("quarters"), 4, 4e-6, 1e-4);
  // Not trivially equal: the gradient norms change from step to step.
  const auto m = testing::metrics_of(run("whole"));
  EXPECT_NE(m[0]["grad_norm"].get<double>(), m[1]["grad_norm"].get<double>());
}

TEST_F(DistributedTrain, TwoGlooRanksTrainLikeOneProcess) {
  train(config("one"));
  ASSERT_EQ(run_cli(train_args("two", {"--nproc", "2"}), dir_ / "two.log"), 0) << read(dir_ / "two.log");
  expect_same_run(run("one"), run("two"), 4);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(run("two") / "final.json"))["world_size"], 2);
  EXPECT_NE(read(dir_ / "two.log").find("2 ranks, Gloo backend"), std::string::npos) << read(dir_ / "two.log");
}

TEST_F(DistributedTrain, ResumesAcrossWorldSizes) {
  train(config("one"));
  // One process for 2 steps, then two ranks to the end.
  TrainOptions stop;
  stop.stop_after_steps = 2;
  ASSERT_EQ(train(config("up"), stop).status, TrainStatus::interrupted);
  ASSERT_EQ(run_cli(train_args("up", {"--nproc", "2"}), dir_ / "up.log"), 0) << read(dir_ / "up.log");
  EXPECT_NE(read(dir_ / "up.log").find("resume: from"), std::string::npos);
  expect_same_run(run("one"), run("up"), 4);
  // Two ranks for 2 steps (the interrupted exit code, 130), then one process to the end.
  ASSERT_EQ(run_cli(train_args("down", {"--nproc", "2", "--stop-after", "2"}), dir_ / "down.log"), 130)
      << read(dir_ / "down.log");
  ASSERT_EQ(RunDir(run("down")).checkpoints().back().step, 2);
  ASSERT_EQ(train(config("down")).status, TrainStatus::finished);
  expect_same_run(run("one"), run("down"), 4);
}

// A rank killed mid-run: the survivor's next collective fails at once (its peer's socket closed),
// and it exits with an error naming itself; a restart resumes from the newest checkpoint.
TEST_F(DistributedTrain, KilledRankEndsTheJobWithAnErrorAndARestartResumes) {
  const auto args = train_args("job", {"--set", "train.max_steps=100000", "--set", "eval.every=100000"});
  auto pids = start_ranks({args, args}, dir_ / "job");
  const auto deadline = Clock::now() + kDeadline;
  while (testing::metrics_of(run("job")).size() < 3 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_GE(testing::metrics_of(run("job")).size(), 3u) << read(dir_ / "job.rank0.log");
  kill(pids[1], SIGKILL);
  const auto killed_at = Clock::now();
  EXPECT_EQ(wait_until(pids[1], deadline), 128 + SIGKILL);
  const int code = wait_until(pids[0], deadline);
  const double seconds = std::chrono::duration<double>(Clock::now() - killed_at).count();
  const auto log = read(dir_ / "job.rank0.log");
  EXPECT_NE(code, 0) << log;
  EXPECT_NE(code, -1) << "rank 0 hung after its peer died";
  EXPECT_LT(seconds, 60.0);  // detected through the closed connection, not the 600 s timeout
  EXPECT_NE(log.find("rank 0 of 2:"), std::string::npos) << log;
  EXPECT_NE(log.find("Another rank has most likely exited"), std::string::npos) << log;

  const auto newest = RunDir(run("job")).checkpoints().back().step;
  ASSERT_EQ(run_cli(train_args("job", {"--set", "train.max_steps=100000", "--set", "eval.every=100000", "--nproc", "2",
                                       "--stop-after", "1"}),
                    dir_ / "restart.log"),
            130)
      << read(dir_ / "restart.log");
  EXPECT_NE(read(dir_ / "restart.log").find("(step " + std::to_string(newest) + ")"), std::string::npos)
      << read(dir_ / "restart.log");
  const auto lines = testing::metrics_of(run("job"));
  EXPECT_EQ(lines.back()["step"], newest + 1);
  EXPECT_EQ(lines.size(), static_cast<size_t>(newest + 1));  // later steps of the failed session dropped
}

// The loss is summed over ranks before the finiteness check, so every rank stops at the same step
// with the same error, by itself (no launcher here to stop the others).
TEST_F(DistributedTrain, NonFiniteLossStopsEveryRank) {
  const auto args = train_args("nan", {"--set", "optim.lr=1e30", "--set", "optim.warmup_steps=0", "--set",
                                       "optim.grad_clip=0", "--set", "checkpoint.every=1"});
  const auto pids = start_ranks({args, args}, dir_ / "nan");
  const auto deadline = Clock::now() + kDeadline;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(wait_until(pids[r], deadline), 1);
    const auto log = read(dir_ / ("nan.rank" + std::to_string(r) + ".log"));
    EXPECT_NE(log.find("non-finite training loss at step"), std::string::npos) << log;
  }
  EXPECT_FALSE(RunDir(run("nan")).checkpoints().empty());
}

// Ranks that would train from different states are refused before step 1: here rank 1 sees a run
// directory without the checkpoint that rank 0 resumes from.
TEST_F(DistributedTrain, RanksThatResumeDifferentStepsAreRefused) {
  TrainOptions stop;
  stop.stop_after_steps = 2;
  train(config("a"), stop);
  const auto pids = start_ranks({train_args("a"), train_args("b")}, dir_ / "differ");
  const auto deadline = Clock::now() + kDeadline;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(wait_until(pids[r], deadline), 1);
    const auto log = read(dir_ / ("differ.rank" + std::to_string(r) + ".log"));
    EXPECT_NE(log.find("resume step: rank 0 has 2"), std::string::npos) << log;
  }
  EXPECT_EQ(testing::metrics_of(run("a")).size(), 2u);  // nothing trained, nothing logged
  EXPECT_FALSE(fs::exists(run("b")));       // rank 1 writes nothing
}

}  // namespace
}  // namespace attnlab
