// The run directory's lock (docs/runs.md, "The lock"): RunDir::claim() holds run.lock for the
// RunWriter's life, a second claim is refused naming the holder's pid and the directory and changes
// nothing, a process killed with SIGKILL lets go, and a lock file left behind means nothing.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "attnlab/run_dir.h"
#include "attnlab/run_state.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

RunConfig config_of(const TempDir& tmp, int64_t max_steps = 3) {
  RunConfig cfg;
  cfg.model.n_layer = 1, cfg.model.n_head = 2, cfg.model.d_model = 16, cfg.model.block_size = 8;
  cfg.model.vocab_size = 64;
  cfg.data.train = tmp.file("t_train_*.bin"), cfg.data.val = tmp.file("t_val_*.bin");
  cfg.train.seq_len = 4, cfg.train.batch_size = 2, cfg.train.max_steps = max_steps;
  cfg.out_dir = tmp.file("run");
  return cfg;
}

std::string claim_error(const RunDir& run, const RunConfig& cfg) {
  try {
    run.claim(cfg, false);
  } catch (const FileError& e) {
    return e.what();
  }
  return "";
}

std::string text_of(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(RunLock, ASecondClaimIsRefusedNamingTheHolderAndChangesNothing) {
  TempDir tmp;
  const RunDir run(tmp.file("run"));
  auto writer = std::make_optional(run.claim(config_of(tmp), false));
  const std::string config_before = text_of(run.config_file());
  const auto holder = run.holder();
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->pid, ::getpid());
  EXPECT_FALSE(holder->host.empty());

  // The claim of a resume with another budget (which would rewrite config.yaml) is refused first.
  const auto error = claim_error(run, config_of(tmp, 9));
  EXPECT_NE(error.find(run.path().string()), std::string::npos) << error;
  EXPECT_NE(error.find("held by pid " + std::to_string(::getpid())), std::string::npos) << error;
  EXPECT_EQ(text_of(run.config_file()), config_before) << "a refused claim rewrote config.yaml";
  const auto state = inspect_run(run.path());
  ASSERT_TRUE(state.held_by.has_value());
  EXPECT_EQ(state.held_by->pid, ::getpid());
  EXPECT_NE(describe(state).find("held by pid " + std::to_string(::getpid())), std::string::npos) << describe(state);

  // Moving the writer keeps the lock; destroying it lets go.
  RunWriter moved = std::move(*writer);
  writer.reset();
  EXPECT_TRUE(run.holder().has_value());
  { const RunWriter gone = std::move(moved); }
  EXPECT_FALSE(run.holder().has_value());
  EXPECT_FALSE(inspect_run(run.path()).held_by.has_value());
  run.claim(config_of(tmp, 9), false);
  EXPECT_EQ(run.config().train.max_steps, 9);
}

TEST(RunLock, AProcessKilledWithSigkillLetsGo) {
  TempDir tmp;
  const RunDir run(tmp.file("run"));
  const auto cfg = config_of(tmp);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {  // claims, says so, and waits to be killed
    ::close(ready[0]);
    try {
      const auto writer = run.claim(cfg, false);
      (void)!::write(ready[1], "1", 1);
      for (;;) ::pause();
    } catch (...) {
      _exit(3);
    }
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the child could not claim";
  ::close(ready[0]);
  const auto error = claim_error(run, cfg);
  EXPECT_NE(error.find("held by pid " + std::to_string(child)), std::string::npos) << error;
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_FALSE(run.holder().has_value()) << "the kernel released the lock of the killed process";
  EXPECT_TRUE(fs::exists(run.lock_file())) << "the lock file stays, meaning nothing";
  EXPECT_EQ(claim_error(run, cfg), "");
}

TEST(RunLock, ALockFileLeftBehindOrAClaimCutShortDoesNotBlock) {
  TempDir tmp;
  const RunDir run(tmp.file("run"));
  fs::create_directories(run.path());
  std::ofstream(run.lock_file()) << "999999 gone-host\n";  // a holder long dead
  std::ofstream(run.path() / ".config.yaml.tmp") << "seed: ";  // killed while writing config.yaml
  EXPECT_FALSE(run.holder().has_value());
  const auto state = inspect_run(run.path());
  EXPECT_EQ(state.status, RunStatus::not_started) << state.detail;
  EXPECT_FALSE(state.held_by.has_value());
  EXPECT_EQ(claim_error(run, config_of(tmp)), "");
  EXPECT_EQ(text_of(run.lock_file()).rfind(std::to_string(::getpid()) + " ", 0), 0u) << text_of(run.lock_file());
}

TEST(RunLock, AForeignDirectoryGetsNoLockFile) {
  TempDir tmp;
  const RunDir run(tmp.file("notes"));
  fs::create_directories(run.path());
  std::ofstream(run.path() / "todo.txt") << "x";
  EXPECT_NE(claim_error(run, config_of(tmp)).find("not an attnlab run directory"), std::string::npos);
  EXPECT_FALSE(fs::exists(run.lock_file()));
}

}  // namespace
}  // namespace attnlab
