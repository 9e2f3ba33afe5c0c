#include "checkpoint/posix_fs.h"

#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "attnlab/checkpoint_error.h"

namespace attnlab::detail {
namespace {

std::optional<struct stat> stat_of(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return st;
}

}  // namespace

bool is_dir(const std::filesystem::path& path) {
  const auto st = stat_of(path);
  return st && S_ISDIR(st->st_mode);
}

bool is_file(const std::filesystem::path& path) {
  const auto st = stat_of(path);
  return st && S_ISREG(st->st_mode);
}

std::optional<uint64_t> file_bytes(const std::filesystem::path& path) {
  const auto st = stat_of(path);
  if (!st) return std::nullopt;
  return static_cast<uint64_t>(st->st_size);
}

std::vector<std::string> list_directory(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  return names;
}

bool make_directories(const std::filesystem::path& dir) {
  if (is_dir(dir)) return false;
  const auto parent = dir.parent_path();
  if (!parent.empty() && parent != dir) make_directories(parent);
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    throw CheckpointError(dir, std::string("cannot create directory: ") + std::strerror(errno));
  }
  return true;
}

void rename_path(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    throw CheckpointError(to, "cannot rename " + from.string() + " to it: " + std::strerror(errno));
  }
}

void remove_tree(const std::filesystem::path& path) noexcept {
  auto remove_one = [](const char* p, const struct stat*, int, struct FTW*) {
    std::remove(p);  // deepest first (FTW_DEPTH), so directories are empty when reached
    return 0;
  };
  ::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

}  // namespace attnlab::detail
