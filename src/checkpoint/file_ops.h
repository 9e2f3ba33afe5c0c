// The file-system operations checkpoints need, each throwing CheckpointError that names the path (or
// reporting failure by its result), so the checkpoint code reads as a sequence of steps. std::filesystem
// underneath: every binary links the system libstdc++ before LibTorch (attnlab_link_stdcxx_first in
// CMakeLists.txt, checked by tests/unit/test_link_order.cpp), so its calls bind to the system's copy.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace attnlab::detail {

bool is_dir(const std::filesystem::path& path);
bool is_file(const std::filesystem::path& path);
/// Size in bytes, or std::nullopt when it cannot be read.
std::optional<uint64_t> file_bytes(const std::filesystem::path& path);
/// Entry names; empty when `dir` cannot be read.
std::vector<std::string> list_directory(const std::filesystem::path& dir);

/// mkdir -p. Returns whether `dir` itself was created; throws CheckpointError naming it on failure.
bool make_directories(const std::filesystem::path& dir);
/// rename(2): atomic within one file system. Throws CheckpointError naming `to` on failure.
void rename_path(const std::filesystem::path& from, const std::filesystem::path& to);
/// rm -rf, best effort (nothing happens when `path` does not exist).
void remove_tree(const std::filesystem::path& path) noexcept;

}  // namespace attnlab::detail
