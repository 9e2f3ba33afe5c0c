// Advisory locks that name their holder: how attnlab keeps two processes out of one directory (a
// run directory, a sweep's output root). The lock is an open-file-description lock (fcntl
// F_OFD_SETLK) on a small file whose text is the holder's "<pid> <host>". The kernel drops it when
// the holder's last descriptor closes, so when the process ends however it ends (kill -9 included);
// a lock file left behind means nothing until someone holds it again. Such locks conflict between
// two FileLocks of one process too, and can be queried (F_OFD_GETLK) without being taken, so asking
// who holds a lock never makes a claim fail. On NFS they are forwarded to the server's lock manager.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace attnlab::detail {

/// Who holds a lock, as its lock file says.
struct LockHolder {
  int64_t pid = 0;   ///< 0 when the holder has not written it yet (it is between locking and writing)
  std::string host;  ///< gethostname() of the holder: a pid means something on that machine only
};

/// "pid 1234 on host node17" (or "an unknown process" while the holder has not written its pid).
std::string describe(const LockHolder& holder);

/// A held lock; released when destroyed (or when the process ends).
class FileLock {
 public:
  /// Takes the lock on `path` without waiting (creating the file, mode 0644, close-on-exec so no
  /// child process inherits it) and writes this process's pid and host into it. std::nullopt when
  /// another process, or another FileLock of this one, holds it. Throws FileError naming the file
  /// when it cannot be created, locked or written for any other reason.
  static std::optional<FileLock> try_acquire(const std::filesystem::path& path);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

/// The holder of the lock on `path`, read without taking the lock; std::nullopt when nobody holds
/// it or the file does not exist. Throws FileError naming the file when it exists but cannot be
/// opened or queried.
std::optional<LockHolder> lock_holder(const std::filesystem::path& path);

}  // namespace attnlab::detail
