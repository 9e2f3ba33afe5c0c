// Rank faults of a data-parallel job on the real binary (docs/distributed.md, "Failures"): a rank
// that never joins or dies while the others wait to start, ranks started with another WORLD_SIZE,
// options or config, a killed `--nproc` launcher, and a rank-0 checkpoint write slower than the
// collective timeout. Each must end the job promptly with an error naming what happened (or, for the
// slow write, finish it), never hang: every process runs under a deadline (rank_processes.h).
#include "support/build_paths.h"
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "attnlab/run_config.h"
#include "attnlab/run_dir.h"
#include "e2e/rank_processes.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using testing::Clock;
using testing::eventually;
using testing::read;
using testing::wait_until;

using RankFaults = testing::DistributedJob;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Nobody ever starts rank 1: rank 0 says, while it waits, whom it waits for and how many of
// WORLD_SIZE joined, and at --dist-timeout names the missing rank and the world size.
TEST_F(RankFaults, ARankThatNeverJoinsIsNamedWhileWaitingAndAtTheTimeout) {
  const auto log = dir_ / "alone.log";
  const pid_t pid = testing::start(train_args("alone", {"--dist-timeout", "12"}), rank_env(0, 2, testing::free_port()), log);
  const int code = wait_until(pid, Clock::now() + testing::kJobDeadline);
  const auto text = read(log);
  EXPECT_EQ(code, 1) << text;
  EXPECT_NE(text.find("rank 0 of 2: waiting for rank(s) 1 to join the job: 1 of WORLD_SIZE=2 ranks have joined"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rank(s) 1 did not join the job within 12 s (--dist-timeout): 1 of WORLD_SIZE=2"),
            std::string::npos)
      << text;
}

// Ranks 0 and 1 of 3 have joined and wait for rank 2 when rank 1 is killed: rank 0 sees rank 1's
// heartbeat stop and ends the wait with an error naming it, long before the 600 s timeout.
TEST_F(RankFaults, ARankThatDiesWhileTheOthersWaitToStartEndsTheWait) {
  const int port = testing::free_port();
  const pid_t rank0 = testing::start(train_args("job"), rank_env(0, 3, port), rank_log(dir_ / "job", 0));
  const pid_t rank1 = testing::start(train_args("job"), rank_env(1, 3, port), rank_log(dir_ / "job", 1));
  const auto deadline = Clock::now() + testing::kJobDeadline;
  const bool waiting = eventually(
      [&] { return read(rank_log(dir_ / "job", 0)).find("2 of WORLD_SIZE=3 ranks have joined") != std::string::npos; },
      deadline);
  kill(rank1, SIGKILL);
  const auto killed = Clock::now();
  EXPECT_EQ(wait_until(rank1, deadline), 128 + SIGKILL);
  const int code = wait_until(rank0, deadline);
  const auto text = read(rank_log(dir_ / "job", 0));
  ASSERT_TRUE(waiting) << "rank 0 never said it was waiting for rank 2:\n" << text;
  EXPECT_EQ(code, 1) << text;
  EXPECT_LT(seconds_since(killed), 60.0) << text;  // the heartbeat's 20 s, not the 600 s timeout
  EXPECT_NE(text.find("rank 0 of 3: rank 1 has stopped responding"), std::string::npos) << text;
}

// Under `train --nproc`, rank 1 is stopped (SIGSTOP) as soon as it is spawned, long before it could
// join, and killed once rank 0 says it waits for it: the launcher's note names the dead rank to rank 0,
// which ends its wait at once with that, not after --dist-timeout (rank 1 never joined, so no heartbeat
// of it is watched) nor as merely "stopped by signal 15" (the launcher's SIGTERM follows its note).
TEST_F(RankFaults, UnderTheLauncherARankThatDiesBeforeJoiningIsNamedToTheOthers) {
  const auto log = dir_ / "launched.log";
  const pid_t launcher = testing::start(train_args("launched", {"--nproc", "2"}), {}, log);
  const auto deadline = Clock::now() + testing::kJobDeadline;
  std::vector<pid_t> ranks;
  ASSERT_TRUE(eventually([&] { return (ranks = testing::children_of(launcher)).size() == 2; }, deadline)) << read(log);
  std::sort(ranks.begin(), ranks.end());  // spawned in rank order
  kill(ranks[1], SIGSTOP);
  const bool waiting = eventually(
      [&] { return read(log).find("rank 0 of 2: waiting for rank(s) 1 to join the job") != std::string::npos; }, deadline);
  kill(ranks[1], SIGKILL);
  const auto killed = Clock::now();
  const int code = wait_until(launcher, deadline);
  const auto text = read(log);
  ASSERT_TRUE(waiting) << text;
  EXPECT_EQ(code, 128 + SIGKILL) << text;  // the failed rank's code
  EXPECT_LT(seconds_since(killed), 25.0) << text;  // not the launcher's SIGKILL after 30 s
  EXPECT_NE(text.find("rank 0 of 2: rank 1 exited with signal 9"), std::string::npos) << text;
}

TEST_F(RankFaults, RanksStartedWithAnotherWorldSizeAreRefusedNamingBoth) {
  const int port = testing::free_port();
  const pid_t rank0 = testing::start(train_args("ws"), rank_env(0, 2, port), rank_log(dir_ / "ws", 0));
  auto env1 = rank_env(1, 3, port);
  const pid_t rank1 = testing::start(train_args("ws"), env1, rank_log(dir_ / "ws", 1));
  const auto deadline = Clock::now() + std::chrono::seconds(120);  // far below the 600 s timeout
  for (const pid_t pid : {rank0, rank1}) EXPECT_EQ(wait_until(pid, deadline), 1);
  for (int r = 0; r < 2; ++r) {
    const auto text = read(rank_log(dir_ / "ws", r));
    EXPECT_NE(text.find("WORLD_SIZE=3"), std::string::npos) << text;
    EXPECT_NE(text.find("WORLD_SIZE=2"), std::string::npos) << text;
  }
}

// --stop-after set differently per rank would stop one rank while the other runs the next step's
// collectives (Gloo aborted a rank with SIGABRT): refused before step 1, naming the option.
TEST_F(RankFaults, OptionsThatMustAgreeAreRefusedNamingTheOption) {
  const auto pids = start_ranks({train_args("opt", {"--stop-after", "1"}), train_args("opt", {"--stop-after", "2"})},
                                dir_ / "opt");
  const auto deadline = Clock::now() + testing::kJobDeadline;
  for (const pid_t pid : pids) EXPECT_EQ(wait_until(pid, deadline), 1);
  const auto rank0 = read(rank_log(dir_ / "opt", 0)), rank1 = read(rank_log(dir_ / "opt", 1));
  EXPECT_NE(rank1.find("--stop-after: rank 0 has 1, this rank 2"), std::string::npos) << rank1;
  EXPECT_NE(rank0.find("--stop-after: rank 0 has 1, 1 rank(s) differ"), std::string::npos) << rank0;
  EXPECT_TRUE(testing::metrics_of(run("opt")).empty());  // nothing trained
}

// A config that differs is named by key, and its hash shown as the hex digest train writes.
TEST_F(RankFaults, ConfigsThatDifferAreRefusedNamingTheKey) {
  const auto pids = start_ranks({train_args("cfg"), train_args("cfg", {"--set", "optim.lr=0.125"})}, dir_ / "cfg");
  const auto deadline = Clock::now() + testing::kJobDeadline;
  for (const pid_t pid : pids) EXPECT_EQ(wait_until(pid, deadline), 1);
  const auto rank0 = read(rank_log(dir_ / "cfg", 0)), rank1 = read(rank_log(dir_ / "cfg", 1));
  const std::string lr0 = nlohmann::json(config("cfg").optim.lr).dump();
  EXPECT_NE(rank1.find("config optim.lr: rank 0 has " + lr0 + ", this rank 0.125"), std::string::npos) << rank1;
  EXPECT_NE(rank1.find("config hash: rank 0 has \"" + config_hash(config("cfg")) + "\""), std::string::npos) << rank1;
  EXPECT_NE(rank0.find("config: 1 rank(s) differ from rank 0"), std::string::npos) << rank0;
}

// Killing the launcher with SIGKILL (it cannot forward anything) must not leave its ranks training:
// each gets a SIGTERM as its parent dies, so they stop together and rank 0 saves a checkpoint.
TEST_F(RankFaults, AKilledLauncherTakesItsRanksWithIt) {
  const auto log = dir_ / "orphans.log";
  const pid_t launcher = testing::start(
      train_args("orphans", {"--nproc", "2", "--set", "train.max_steps=100000", "--set", "eval.every=100000"}), {}, log);
  const auto deadline = Clock::now() + testing::kJobDeadline;
  std::vector<pid_t> ranks;
  ASSERT_TRUE(eventually([&] { return (ranks = testing::children_of(launcher)).size() == 2; }, deadline)) << read(log);
  const bool training = eventually([&] { return testing::metrics_of(run("orphans")).size() >= 2; }, deadline);
  kill(launcher, SIGKILL);
  wait_until(launcher, deadline);
  const bool ended = eventually([&] { return testing::has_ended(ranks[0]) && testing::has_ended(ranks[1]); },
                                Clock::now() + std::chrono::seconds(120));
  for (const pid_t pid : ranks) kill(pid, SIGKILL);  // whatever the outcome, no orphan outlives the test
  ASSERT_TRUE(training) << read(log);
  EXPECT_TRUE(ended) << "the ranks trained on after their launcher was killed:\n" << read(log);
  EXPECT_NE(read(log).find("stopped at step"), std::string::npos) << read(log);
  ASSERT_FALSE(RunDir(run("orphans")).checkpoints().empty());
  EXPECT_EQ(RunDir(run("orphans")).checkpoints().back().step, testing::metrics_of(run("orphans")).back()["step"]);
}

// Rank 0's checkpoint writes take 7 s each (a test library delays the rename that publishes them)
// under a collective timeout of 3 s: the other rank waits for the write, saying so, as long as rank 0
// is alive, and the job finishes with every file complete.
TEST_F(RankFaults, ARankZeroCheckpointWriteSlowerThanTheTimeoutIsWaitedFor) {
  const auto log = dir_ / "slow.log";
  const int code = testing::run_job(train_args("slow", {"--nproc", "2", "--dist-timeout", "3"}), log,
                                    {std::string("LD_PRELOAD=") + attnlab::test::slow_rename_library(),
                                     "ATTNLAB_TEST_SLOW_RENAME_MATCH=/checkpoints/step_",
                                     "ATTNLAB_TEST_SLOW_RENAME_SECONDS=7"});
  const auto text = read(log);
  ASSERT_EQ(code, 0) << text;
  EXPECT_NE(text.find("rank 1 of 2: waiting for rank 0 to finish writing the checkpoint of step 2"), std::string::npos)
      << text;
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(run("slow") / "final.json"))["steps"], 4);
  std::vector<int64_t> steps;
  for (const auto& c : RunDir(run("slow")).checkpoints()) steps.push_back(c.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{2, 4}));
}

}  // namespace
}  // namespace attnlab
