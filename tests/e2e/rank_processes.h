// The real `attnlab` binary as the ranks of a data-parallel job, for the e2e tests of
// docs/distributed.md: ranks started by hand with torchrun's variables (rank 0 serves the store, no
// launcher to stop a survivor) or through `train --nproc`, each under a deadline past which it is
// killed and the test fails, so that a hang never hangs the suite.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "e2e/cli.h"
#include "e2e/micro_runs.h"

extern char** environ;

namespace attnlab::testing {

using Clock = std::chrono::steady_clock;

/// Far above the ~10 s a job takes here.
inline constexpr auto kJobDeadline = std::chrono::seconds(180);

/// `attnlab args...` with `env` ("NAME=value") replacing or extending ours, output appended to `log`.
inline pid_t start(const std::vector<std::string>& args, const std::vector<std::string>& env,
                   const std::filesystem::path& log) {
  auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  std::vector<std::string> env_strings(env);
  for (char** e = environ; *e; ++e) {
    const bool replaced = std::any_of(env.begin(), env.end(), [&](const auto& o) { return name_of(o) == name_of(*e); });
    if (!replaced) env_strings.emplace_back(*e);
  }
  std::vector<char*> argv = {const_cast<char*>(kAttnlab.c_str())}, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  for (auto& e : env_strings) envp.push_back(e.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execve(kAttnlab.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

/// The exit code (128 + signal when killed), or -1 after killing a child that outlived `deadline`.
inline int wait_until(pid_t pid, Clock::time_point deadline) {
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// `attnlab args...` to its end (or kJobDeadline), with `env` as start() takes it.
inline int run_job(const std::vector<std::string>& args, const std::filesystem::path& log,
                   const std::vector<std::string>& env = {}) {
  return wait_until(start(args, env, log), Clock::now() + kJobDeadline);
}

/// The parent pid in /proc/<pid>/stat, and its state letter ('Z' for a zombie); {-1, 0} when gone.
inline std::pair<pid_t, char> proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos || close + 4 >= text.size()) return {-1, 0};
  const char state = text[close + 2];
  return {static_cast<pid_t>(std::stol(text.substr(close + 4))), state};
}

/// The processes whose parent is `parent`.
inline std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const auto name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    if (proc_stat(std::stoi(name)).first == parent) out.push_back(std::stoi(name));
  }
  return out;
}

/// True once `pid` has exited (gone, or a zombie that its new parent has not reaped yet).
inline bool has_ended(pid_t pid) {
  const auto [parent, state] = proc_stat(pid);
  return parent < 0 || state == 'Z';
}

/// Polls `ok` every 20 ms until it holds or `deadline` passes; whether it held.
template <class Predicate>
bool eventually(Predicate ok, Clock::time_point deadline) {
  while (!ok()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

/// The micro runs of micro_runs.h, trained by the binary as ranks.
class DistributedJob : public MicroRuns {
 protected:
  /// `attnlab train` on run.yaml into run `out`, with extra arguments.
  std::vector<std::string> train_args(const std::string& out, std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {"train", "--config", (dir_ / "run.yaml").string(), "--set", "out_dir=" + run(out).string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  /// torchrun's variables for rank `rank` of `world_size` at 127.0.0.1:`port`.
  static std::vector<std::string> rank_env(int rank, int world_size, int port) {
    return {"RANK=" + std::to_string(rank), "LOCAL_RANK=" + std::to_string(rank),
            "WORLD_SIZE=" + std::to_string(world_size), "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port)};
  }
  /// Ranks started by hand (no launcher to stop a survivor): rank 0 serves the store; rank r's output
  /// goes to <log_stem>.rank<r>.log.
  std::vector<pid_t> start_ranks(const std::vector<std::vector<std::string>>& args, const std::filesystem::path& log_stem) const {
    const int port = free_port();
    std::vector<pid_t> pids;
    for (size_t r = 0; r < args.size(); ++r) {
      pids.push_back(start(args[r], rank_env(static_cast<int>(r), static_cast<int>(args.size()), port),
                           rank_log(log_stem, static_cast<int>(r))));
    }
    return pids;
  }
  static std::filesystem::path rank_log(const std::filesystem::path& stem, int rank) {
    return stem.string() + ".rank" + std::to_string(rank) + ".log";
  }
};

}  // namespace attnlab::testing
