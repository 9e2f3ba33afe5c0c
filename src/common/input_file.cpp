#include "common/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "attnlab/file_error.h"

namespace attnlab::detail {
namespace {

std::string kind_of_mode(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

std::string problem_of_kind(const std::string& kind) {
  if (kind == "a regular file") return "";
  return kind == "missing" ? "does not exist" : "is " + kind + ", not a regular file";
}

[[noreturn]] void refuse_kind(const std::filesystem::path& path, const std::string& kind) {
  throw FileError(path, problem_of_kind(kind));
}

// Closes the descriptor on every way out.
struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  Fd(Fd&& other) noexcept : fd(other.fd) { other.fd = -1; }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens `path` without blocking (a FIFO without a writer would block a plain open) and checks what
// the descriptor is, so nothing can swap the path between the check and the read.
// A regular file larger than `max_bytes` is refused by its size before any read.
Fd open_checked(const std::filesystem::path& path, bool pipe_allowed, int64_t max_bytes) {
  Fd in{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (in.fd < 0) {
    if (errno == ENOENT) refuse_kind(path, describe_file_kind(path));
    throw FileError(path, std::string("cannot open: ") + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(in.fd, &st) != 0) throw FileError(path, std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode) && !(pipe_allowed && S_ISFIFO(st.st_mode))) refuse_kind(path, kind_of_mode(st.st_mode));
  if (S_ISREG(st.st_mode) && st.st_size > max_bytes) {
    throw FileError(path, fmt::format("is {} bytes, more than the {} this reader takes", st.st_size, max_bytes));
  }
  // Reads of a pipe then wait for its writer; one with none (a named FIFO nobody opened) reads as empty.
  const int flags = ::fcntl(in.fd, F_GETFL);
  if (flags < 0 || ::fcntl(in.fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
    throw FileError(path, std::string("cannot read: ") + std::strerror(errno));
  return in;
}

std::string read_all(const Fd& in, const std::filesystem::path& path, int64_t max_bytes) {
  std::string text;
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(in.fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw FileError(path, std::string("cannot read: ") + std::strerror(errno));
    if (n == 0) return text;
    text.append(chunk, static_cast<size_t>(n));
    if (static_cast<int64_t>(text.size()) > max_bytes) {
      throw FileError(path, fmt::format("holds more than {} bytes, the most this reader takes", max_bytes));
    }
  }
}

}  // namespace

std::string describe_file_kind(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return kind_of_mode(st.st_mode);
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) return "a symbolic link to nothing";
  return "missing";
}

std::string regular_file_problem(const std::filesystem::path& path) { return problem_of_kind(describe_file_kind(path)); }

void require_regular_file(const std::filesystem::path& path) {
  if (const auto problem = regular_file_problem(path); !problem.empty()) throw FileError(path, problem);
}

bool regular_file_exists(const std::filesystem::path& path) {
  const std::string kind = describe_file_kind(path);
  if (kind == "missing") return false;
  if (kind != "a regular file") refuse_kind(path, kind);
  return true;
}

std::string read_regular_file(const std::filesystem::path& path, int64_t max_bytes) {
  return read_all(open_checked(path, /*pipe_allowed=*/false, max_bytes), path, max_bytes);
}

std::string read_file_or_pipe(const std::filesystem::path& path, int64_t max_bytes) {
  return read_all(open_checked(path, /*pipe_allowed=*/true, max_bytes), path, max_bytes);
}

}  // namespace attnlab::detail
