// Files and directories that survive a crash once written (POSIX write + fsync): the one place
// attnlab makes a write durable. Checkpoints write everything durably into a temporary directory
// before one rename publishes it; single files (config.yaml, final.json, the sweep manifest, every
// analysis output) go through write_file_atomically().
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace attnlab::detail {

/// A file being written; it is durable only after commit(). Errors throw FileError naming the file
/// and strerror(errno).
class DurableFile {
 public:
  /// Creates or truncates `path`.
  explicit DurableFile(std::filesystem::path path);
  ~DurableFile();  ///< closes without fsync if commit() was not reached (an exception unwinding)
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;

  void write(const void* data, std::size_t bytes);
  /// fsync, then close.
  void commit();

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

/// Writes `contents` to `path` and fsyncs it.
void write_file_durably(const std::filesystem::path& path, const std::string& contents);

/// Replaces `path` by `contents` atomically: a hidden temporary sibling (".<name>.tmp") is written
/// durably and renamed over `path`, then the directory is fsynced. A reader sees the old file or
/// the new one, never a mix, and a failed write leaves no temporary behind. Throws FileError.
void write_file_atomically(const std::filesystem::path& path, const std::string& contents);

/// fsyncs a directory, making the creation, rename or removal of its entries durable.
void fsync_directory(const std::filesystem::path& dir);

}  // namespace attnlab::detail
