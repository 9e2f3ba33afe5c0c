// The one test translation unit compiled with the checkout's absolute paths (tests/CMakeLists.txt).
#include "support/build_paths.h"

#include <cstdlib>

namespace attnlab::test {

std::filesystem::path source_dir() {
  const char* env = std::getenv("ATTNLAB_SOURCE_DIR");
  return env && *env ? std::filesystem::path(env) : std::filesystem::path(ATTNLAB_TEST_SOURCE_DIR);
}

std::filesystem::path binary_dir() { return ATTNLAB_TEST_BINARY_DIR; }

std::string python() { return ATTNLAB_TEST_PYTHON; }

std::string slow_rename_library() { return ATTNLAB_TEST_SLOW_RENAME_LIBRARY; }

}  // namespace attnlab::test
