// Child processes for the sweep's workers and the report's plot script: posix_spawn (no code runs
// between fork and exec, which matters in a process whose LibTorch may own threads).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace attnlab::process {

/// Starts `executable` with `args` (argv[1...]). Its stdout and stderr are appended to `log`, or
/// shared with ours when `log` is empty. `env` entries ("NAME=value") replace or extend our
/// environment. Throws std::runtime_error naming the executable when it cannot be started.
pid_t spawn(const std::filesystem::path& executable, const std::vector<std::string>& args,
            const std::filesystem::path& log = {}, const std::vector<std::string>& env = {});

/// The exit code of `pid` once it has ended, 128 + signal when a signal killed it; std::nullopt
/// while it runs (never blocks).
std::optional<int> poll_exit(pid_t pid);

/// Blocks until `pid` ends; its exit code as poll_exit() gives it.
int wait_exit(pid_t pid);

}  // namespace attnlab::process
