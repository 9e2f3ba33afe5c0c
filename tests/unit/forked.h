// Runs a piece of a test in a forked child, so it can change what only a whole process can: its
// file size limit (RLIMIT_FSIZE: a write past it fails with EFBIG, as on a full disk), or be killed.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <exception>
#include <functional>
#include <string>

namespace attnlab::testing {

/// Runs `body` in a child process and returns the text it returned; "child died: ..." when it did
/// not return (a crash, an uncaught exception's message after "uncaught: ").
inline std::string in_child(const std::function<std::string()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return "child died: no pipe";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    try {
      out = body();
    } catch (const std::exception& e) {
      out = std::string("uncaught: ") + e.what();
    }
    for (size_t done = 0; done < out.size();) {
      const ssize_t n = ::write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    _exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status)) return "child died: signal " + std::to_string(WTERMSIG(status)) + "; said: " + text;
  return text;
}

/// In a child: files may grow to `bytes` at most (soft limit; the hard one stays, so it can be
/// raised again); a write past it fails with EFBIG instead of raising SIGXFSZ.
inline void limit_file_size(rlim_t bytes) {
  ::signal(SIGXFSZ, SIG_IGN);
  rlimit lim{};
  ::getrlimit(RLIMIT_FSIZE, &lim);
  lim.rlim_cur = bytes;
  ::setrlimit(RLIMIT_FSIZE, &lim);
}

/// Lifts limit_file_size() (space freed on the disk).
inline void lift_file_size_limit() {
  rlimit lim{};
  ::getrlimit(RLIMIT_FSIZE, &lim);
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_FSIZE, &lim);
}

}  // namespace attnlab::testing
