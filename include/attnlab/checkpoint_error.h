// The one exception type of checkpoint and safetensors I/O, so callers (load_latest, the CLI) can
// tell "this file is bad" apart from programming errors and fall back to an older checkpoint.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

namespace attnlab {

/// A checkpoint or safetensors file that cannot be written, read or trusted. what() is
/// "<file>: <problem>", so every message names the file it is about.
class CheckpointError : public std::runtime_error {
 public:
  CheckpointError(const std::filesystem::path& file, const std::string& problem)
      : std::runtime_error(file.string() + ": " + problem), file_(file), problem_(problem) {}

  const std::filesystem::path& file() const noexcept { return file_; }
  /// The message without the file name.
  const std::string& problem() const noexcept { return problem_; }

 private:
  std::filesystem::path file_;
  std::string problem_;
};

}  // namespace attnlab
