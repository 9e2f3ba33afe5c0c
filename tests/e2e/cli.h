// The real `attnlab` binary (the one this build made) as a child process, for end-to-end tests.
#pragma once

#include "support/build_paths.h"
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace attnlab::testing {

/// build/attnlab (support/build_paths.h).
inline const std::filesystem::path kAttnlab = attnlab::test::binary_dir() / "attnlab";

/// The whole text of a file ("" when it cannot be read).
inline std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// Starts `attnlab <args...>` with stdout and stderr appended to `log`; returns its pid.
inline pid_t start_cli(const std::vector<std::string>& args, const std::filesystem::path& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    std::vector<char*> argv = {const_cast<char*>(kAttnlab.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(kAttnlab.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

/// Waits for `pid`: its exit code, or 128 + the signal that ended it.
inline int exit_code(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// Runs the binary with `args` (each single-quoted for the shell, so none may hold a quote); stdout
/// goes to `out`, stderr to `err` (to `out` as well when empty). Returns the exit code.
inline int run_cli(const std::vector<std::string>& args, const std::filesystem::path& out,
                   const std::filesystem::path& err = {}) {
  std::string cmd = kAttnlab.string();
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " > '" + out.string() + "' " + (err.empty() ? std::string("2>&1") : "2> '" + err.string() + "'");
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

}  // namespace attnlab::testing
