// Running the attnlab binary of this build from end-to-end tests.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace attnlab::testing {

/// build/attnlab (ATTNLAB_BINARY_DIR is defined for every test target).
inline const std::filesystem::path kAttnlab = std::filesystem::path(ATTNLAB_BINARY_DIR) / "attnlab";

inline std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// Runs the binary with `args` (each single-quoted for the shell, so none may hold a quote); stdout
/// goes to `out`, stderr to `err` (to `out` as well when empty). Returns the exit code.
inline int run_cli(const std::vector<std::string>& args, const std::filesystem::path& out,
                   const std::filesystem::path& err = {}) {
  std::string cmd = kAttnlab.string();
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " > '" + out.string() + "' " + (err.empty() ? std::string("2>&1") : "2> '" + err.string() + "'");
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

}  // namespace attnlab::testing
