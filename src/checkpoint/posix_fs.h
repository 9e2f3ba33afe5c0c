// The few file-system operations checkpoints need, on POSIX calls rather than std::filesystem:
// libtorch.so exports its own copies of std::filesystem's operations (status, rename, remove_all,
// ...), the dynamic linker binds ours to them, and its remove_all crashed (a null call). Paths
// stay std::filesystem::path, whose methods are not affected.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace attnlab::detail {

bool is_dir(const std::filesystem::path& path);
bool is_file(const std::filesystem::path& path);
/// Size in bytes, or std::nullopt (with errno set) when it cannot be read.
std::optional<uint64_t> file_bytes(const std::filesystem::path& path);
/// Entry names (without "." and ".."); empty when `dir` cannot be read.
std::vector<std::string> list_directory(const std::filesystem::path& dir);

/// mkdir -p. Returns whether `dir` itself was created; throws CheckpointError naming it on failure.
bool make_directories(const std::filesystem::path& dir);
/// rename(2): atomic within one file system. Throws CheckpointError naming `to` on failure.
void rename_path(const std::filesystem::path& from, const std::filesystem::path& to);
/// rm -rf, best effort (nothing happens when `path` does not exist).
void remove_tree(const std::filesystem::path& path) noexcept;

}  // namespace attnlab::detail
