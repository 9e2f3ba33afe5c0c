#include "common/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "attnlab/file_error.h"

namespace attnlab::detail {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const char* what) {
  throw FileError(path, std::string(what) + ": " + std::strerror(errno));
}

}  // namespace

DurableFile::DurableFile(std::filesystem::path path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(path_, "cannot create");
}

DurableFile::~DurableFile() {
  if (fd_ >= 0) ::close(fd_);
}

void DurableFile::write(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {  // write() may write less than asked (signals, large sizes)
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path_, "write failed");
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void DurableFile::commit() {
  if (::fsync(fd_) != 0) fail(path_, "fsync failed");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(path_, "close failed");
}

void write_file_durably(const std::filesystem::path& path, const std::string& contents) {
  DurableFile file(path);
  file.write(contents.data(), contents.size());
  file.commit();
}

void write_file_atomically(const std::filesystem::path& path, const std::string& contents) {
  const auto dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  const auto tmp = dir / ("." + path.filename().string() + ".tmp");
  try {
    write_file_durably(tmp, contents);
    if (::rename(tmp.c_str(), path.c_str()) != 0) fail(path, "cannot rename the temporary file over it");
  } catch (...) {
    ::unlink(tmp.c_str());  // nothing half-written stays behind
    throw;
  }
  fsync_directory(dir);
}

void fsync_directory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(dir, "cannot open directory");
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) fail(dir, "fsync of directory failed");
}

}  // namespace attnlab::detail
