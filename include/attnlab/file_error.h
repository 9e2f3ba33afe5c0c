// The exception of every file attnlab cannot write, read or trust: what() is "<file>: <problem>", so
// the message always names the file. CheckpointError (checkpoint_error.h) is the checkpoint code's
// kind of it, so callers that fall back to an older checkpoint can tell the two apart.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

namespace attnlab {

class FileError : public std::runtime_error {
 public:
  FileError(const std::filesystem::path& file, const std::string& problem)
      : std::runtime_error(file.string() + ": " + problem), file_(file), problem_(problem) {}

  const std::filesystem::path& file() const noexcept { return file_; }
  /// The message without the file name.
  const std::string& problem() const noexcept { return problem_; }

 private:
  std::filesystem::path file_;
  std::string problem_;
};

}  // namespace attnlab
