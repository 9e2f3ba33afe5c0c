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

/// A child whose stdin is our end of a socket pair (send() with MSG_NOSIGNAL: a child that has died
/// gives EPIPE, never a SIGPIPE that would end us); its stdout and stderr are ours.
struct FedChild {
  pid_t pid = -1;
  int input = -1;  ///< write what the child reads on stdin; close it for its EOF
};

/// Starts `executable` with `args` as spawn() does, its stdin fed by us (FedChild). Throws
/// std::runtime_error naming the executable when it cannot be started.
FedChild spawn_fed(const std::filesystem::path& executable, const std::vector<std::string>& args);

/// Writes all of `text` to a FedChild's input; false when the child has stopped reading (EPIPE).
bool feed(const FedChild& child, const std::string& text);

/// The exit code of `pid` once it has ended, 128 + signal when a signal killed it; std::nullopt
/// while it runs (never blocks).
std::optional<int> poll_exit(pid_t pid);

/// Blocks until `pid` ends; its exit code as poll_exit() gives it.
int wait_exit(pid_t pid);

}  // namespace attnlab::process
