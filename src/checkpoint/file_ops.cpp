#include "checkpoint/file_ops.h"

#include <system_error>

#include "attnlab/checkpoint_error.h"

namespace attnlab::detail {
namespace fs = std::filesystem;

bool is_dir(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

bool is_file(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

std::optional<uint64_t> file_bytes(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return std::nullopt;
  return static_cast<uint64_t>(size);
}

std::vector<std::string> list_directory(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  return names;
}

bool make_directories(const fs::path& dir) {
  std::error_code ec;
  const bool created = fs::create_directories(dir, ec);
  if (ec) throw CheckpointError(dir, "cannot create directory: " + ec.message());
  return created;
}

void rename_path(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) throw CheckpointError(to, "cannot rename " + from.string() + " to it: " + ec.message());
}

void remove_tree(const fs::path& path) noexcept {
  std::error_code ec;
  fs::remove_all(path, ec);
}

}  // namespace attnlab::detail
