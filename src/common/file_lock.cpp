#include "common/file_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <sstream>

#include "attnlab/file_error.h"

namespace attnlab::detail {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const char* what) {
  throw FileError(path, std::string(what) + ": " + std::strerror(errno));
}

// The whole file, as one lock (l_start 0, l_len 0 = to the end, however long).
struct flock whole_file(short type) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  return lock;
}

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "unknown";
}

// Replaces the lock file's text by "<pid> <host>\n".
void write_holder(int fd, const std::filesystem::path& path) {
  const std::string text = std::to_string(::getpid()) + " " + host_name() + "\n";
  if (::ftruncate(fd, 0) != 0) fail(path, "cannot rewrite the lock file");
  if (::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
    fail(path, "cannot write the holder's pid into the lock file");
}

LockHolder read_holder(int fd) {
  char buf[512] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  LockHolder holder;
  if (n <= 0) return holder;
  std::istringstream in(std::string(buf, static_cast<size_t>(n)));
  in >> holder.pid >> holder.host;  // a text cut short leaves pid 0: unknown
  if (holder.pid < 0) holder.pid = 0;
  return holder;
}

}  // namespace

std::string describe(const LockHolder& holder) {
  if (holder.pid <= 0) return "an unknown process (it has not written its pid yet)";
  return "pid " + std::to_string(holder.pid) + (holder.host.empty() ? "" : " on host " + holder.host);
}

std::optional<FileLock> FileLock::try_acquire(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, "cannot open the lock file");
  FileLock lock(fd);  // closes the descriptor on every way out
  auto want = whole_file(F_WRLCK);
  if (::fcntl(fd, F_OFD_SETLK, &want) != 0) {
    if (errno == EACCES || errno == EAGAIN) return std::nullopt;
    fail(path, "cannot lock");
  }
  write_holder(fd, path);
  return lock;
}

FileLock::FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // the lock goes with the last descriptor of its open file description
}

std::optional<LockHolder> lock_holder(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    fail(path, "cannot open the lock file");
  }
  auto probe = whole_file(F_RDLCK);  // would a reader be blocked? only by a held (write) lock
  const int rc = ::fcntl(fd, F_OFD_GETLK, &probe);
  const int err = errno;
  std::optional<LockHolder> holder;
  if (rc == 0 && probe.l_type != F_UNLCK) holder = read_holder(fd);
  ::close(fd);
  if (rc != 0) {
    errno = err;
    fail(path, "cannot query the lock");
  }
  return holder;
}

}  // namespace attnlab::detail
