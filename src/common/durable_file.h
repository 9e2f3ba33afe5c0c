// Files and directories that survive a crash once written (POSIX write + fsync). Private to the
// checkpoint code: checkpoints are made atomic by writing everything durably into a temporary
// directory before one rename publishes it.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace attnlab::detail {

/// A file being written; it is durable only after commit(). Errors throw CheckpointError naming
/// the file and strerror(errno).
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

/// fsyncs a directory, making the creation, rename or removal of its entries durable.
void fsync_directory(const std::filesystem::path& dir);

}  // namespace attnlab::detail
