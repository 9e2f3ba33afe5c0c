// End to end through the real `attnlab train` process: SIGTERM while it starts up takes the usual
// stop path, and SIGKILL during checkpoint saves never leaves a corrupt checkpoint while the resumed
// run still finishes bit-identical to an uninterrupted one.
#include "support/build_paths.h"
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "attnlab/checkpoint.h"
#include "attnlab/run_dir.h"
#include "attnlab/trained_run.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using testing::ShardSpec;

const fs::path kAttnlab = attnlab::test::binary_dir() / "attnlab";

std::string read(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

pid_t start_train(const std::vector<std::string>& args, const fs::path& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    std::vector<char*> argv = {const_cast<char*>(kAttnlab.c_str()), const_cast<char*>("train")};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(kAttnlab.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

/// Whether `dir` holds a hidden .tmp. directory: a checkpoint save under way.
bool save_in_progress(const fs::path& dir) {
  bool found = false;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) found = found || std::string(e->d_name).rfind(".tmp.", 0) == 0;
    ::closedir(d);
  }
  return found;
}

int wait_status(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

class TrainProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kAttnlab)) << kAttnlab << " not built";
    tmp_.write_shard("toy_val_000000.bin", ShardSpec{testing::iota_tokens(4096, 1, 64)});
    tmp_.write_shard("toy_train_000001.bin", ShardSpec{testing::iota_tokens(40000, 5, 64)});
    tmp_.write_text("tokenizer.json", R"({"tokenizer": "bytes", "vocab_size": 64})");
  }
  fs::path dir() const { return tmp_.path(); }
  std::string config_text(int64_t max_steps) const {
    return "model: {arm: baseline, n_layer: 1, n_head: 2, d_model: 32, block_size: 32, vocab_size: 64}\n"
           "data: {train: '" + tmp_.file("*_train_*.bin") + "', val: '" + tmp_.file("*_val_*.bin") +
           "', val_tokens: 512}\n"
           "train: {batch_size: 4, seq_len: 16, tokens_per_step: 64, max_steps: " + std::to_string(max_steps) +
           ", threads: 1, device: cpu}\n"
           "optim: {lr: 0.01, warmup_steps: 2}\neval: {every: 5}\ncheckpoint: {every: 1, keep_last: 2}\n";
  }
  testing::TempDir tmp_;
};

// True once process `pid` runs attnlab (not the test's fork before its exec, which holds the test's
// descriptors) and holds `file` open (a link in /proc/<pid>/fd names it).
bool holds_open(pid_t pid, const fs::path& file) {
  std::error_code ec;
  const fs::path proc = "/proc/" + std::to_string(pid);
  if (fs::read_symlink(proc / "exe", ec).filename() != "attnlab") return false;
  const fs::path target = fs::canonical(file, ec);
  for (const auto& fd : fs::directory_iterator(proc / "fd", ec)) {
    std::error_code link_ec;
    if (fs::read_symlink(fd.path(), link_ec) == target) return true;
  }
  return false;
}

// The config is a FIFO that the test holds open for writing (so attnlab's read waits for its text
// instead of reading an empty config): once attnlab holds it open too, it is in its start-up; the
// test sends SIGTERM then, and only afterwards writes the config.
TEST_F(TrainProcess, SigtermDuringStartUpTakesTheStopPath) {
  const fs::path fifo = dir() / "run.yaml", log = dir() / "train.log";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int fd = ::open(fifo.c_str(), O_RDWR | O_CLOEXEC);  // read-write: never blocks (Linux); not inherited
  ASSERT_GE(fd, 0) << "opening the FIFO";
  const pid_t pid = start_train({"--config", fifo.string(), "--set", "out_dir=" + (dir() / "run").string()}, log);
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (!holds_open(pid, fifo) && Clock::now() < deadline) {
    ASSERT_EQ(waitpid(pid, nullptr, WNOHANG), 0) << "attnlab exited before reading its config: " << read(log);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(holds_open(pid, fifo)) << "attnlab never opened its config";
  ::kill(pid, SIGTERM);
  const std::string text = config_text(20);
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  const int status = wait_status(pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << ": " << read(log);
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << read(log);
  EXPECT_NE(read(log).find("stopped before step 1 (signal 15)"), std::string::npos) << read(log);
  EXPECT_TRUE(RunDir(dir() / "run").checkpoints().empty());
}

// SIGKILL at moments when a save is under way (a hidden .tmp. directory exists), several times;
// every checkpoint left under a final name loads (checksums included), and the run resumed after
// each kill ends with the weights and validation loss of an uninterrupted run.
TEST_F(TrainProcess, KillDuringSavesLeavesNoCorruptCheckpointAndAnIdenticalFinish) {
  const int64_t steps = 40;
  tmp_.write_text("run.yaml", config_text(steps));
  auto args = [&](const std::string& out) {
    return std::vector<std::string>{"--config", tmp_.file("run.yaml"), "--set", "out_dir=" + (dir() / out).string()};
  };
  const fs::path log = dir() / "train.log", killed = dir() / "killed";
  ASSERT_EQ(WEXITSTATUS(wait_status(start_train(args("straight"), log))), 0) << read(log);

  int kills = 0, during_save = 0;
  for (int attempt = 0; attempt < 8 && kills < 6; ++attempt) {
    const pid_t pid = start_train(args("killed"), log);
    // Let it take a step or two after its start-up, then wait for a save in progress.
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    bool saving = false, exited = false;
    while (Clock::now() < deadline && !saving && !(exited = waitpid(pid, nullptr, WNOHANG) == pid)) {
      saving = save_in_progress(killed / "checkpoints");
      if (!saving) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (exited) break;  // finished before a kill landed
    ::kill(pid, SIGKILL);
    const int status = wait_status(pid);
    ASSERT_TRUE(WIFSIGNALED(status) || WEXITSTATUS(status) == 0) << read(log);
    if (WIFSIGNALED(status)) ++kills, during_save += saving;
    for (const auto& c : RunDir(killed).checkpoints())
      EXPECT_NO_THROW(load_checkpoint(c.dir)) << "corrupt after kill " << kills << ": " << c.dir;
  }
  std::cout << kills << " SIGKILLs, " << during_save << " of them during a save\n";
  EXPECT_GE(kills, 3) << read(log);
  EXPECT_GE(during_save, 1) << "no kill landed during a save";
  ASSERT_EQ(WEXITSTATUS(wait_status(start_train(args("killed"), log))), 0) << read(log);

  const auto a = nlohmann::json::parse(read(dir() / "straight/final.json"));
  const auto b = nlohmann::json::parse(read(killed / "final.json"));
  EXPECT_EQ(b["steps"], steps);
  EXPECT_EQ(a["final_val_loss"].get<double>(), b["final_val_loss"].get<double>());
  const auto wa = open_model(dir() / "straight"), wb = open_model(killed);
  for (const auto& item : wa.model->named_parameters())
    EXPECT_TRUE(torch::equal(item.value(), wb.model->named_parameters()[item.key()])) << item.key();
}

}  // namespace
}  // namespace attnlab
