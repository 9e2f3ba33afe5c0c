#include "common/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>

extern char** environ;

namespace attnlab::process {
namespace {

// Our environment with `overrides` replacing same-named entries.
std::vector<std::string> merged_environment(const std::vector<std::string>& overrides) {
  std::vector<std::string> out;
  auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const auto& o : overrides) replaced |= name_of(o) == name_of(entry);
    if (!replaced) out.push_back(entry);
  }
  out.insert(out.end(), overrides.begin(), overrides.end());
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

pid_t spawn(const std::filesystem::path& executable, const std::vector<std::string>& args,
            const std::filesystem::path& log, const std::vector<std::string>& env) {
  std::vector<std::string> argv_strings = {executable.string()};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<std::string> env_strings = merged_environment(env);
  auto argv = c_strings(argv_strings);
  auto envp = c_strings(env_strings);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!log.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  }
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, executable.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + executable.string() + ": " + strerror(rc));
  return pid;
}

FedChild spawn_fed(const std::filesystem::path& executable, const std::vector<std::string>& args) {
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0)
    throw std::runtime_error("cannot start " + executable.string() + ": socketpair: " + strerror(errno));
  std::vector<std::string> argv_strings = {executable.string()};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<std::string> env_strings = merged_environment({});
  auto argv = c_strings(argv_strings);
  auto envp = c_strings(env_strings);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, ends[1], STDIN_FILENO);  // dup2 clears close-on-exec
  FedChild child;
  const int rc = posix_spawn(&child.pid, executable.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(ends[1]);
  if (rc != 0) {
    ::close(ends[0]);
    throw std::runtime_error("cannot start " + executable.string() + ": " + strerror(rc));
  }
  child.input = ends[0];
  return child;
}

bool feed(const FedChild& child, const std::string& text) {
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::send(child.input, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::optional<int> poll_exit(pid_t pid) {
  int status = 0;
  const pid_t r = waitpid(pid, &status, WNOHANG);
  if (r == 0) return std::nullopt;
  if (r < 0) return errno == EINTR ? std::nullopt : std::optional<int>(1);
  return exit_code_of(status);
}

int wait_exit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 1;
  }
  return exit_code_of(status);
}

}  // namespace attnlab::process
