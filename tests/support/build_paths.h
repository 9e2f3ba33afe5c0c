// Where the tests find the source tree, the build tree and the tools they run. The paths live in one
// translation unit (build_paths.cpp, the only one compiled with them), so every other test object is
// the same on any checkout and a fresh clone's test build hits ccache (docs/building.md).
#pragma once

#include <filesystem>
#include <string>

namespace attnlab::test {

/// The source tree: $ATTNLAB_SOURCE_DIR where set (a prebuilt GPU bundle runs on another machine than
/// it was built on: scripts/gpu_check.sh sets it), else the tree this build was configured from.
std::filesystem::path source_dir();
/// The build tree (build/attnlab lives there).
std::filesystem::path binary_dir();
/// The project venv's python found at configure time; empty when there was none.
std::string python();
/// The test-only LD_PRELOAD library of support/slow_rename.cpp (test_e2e only; empty elsewhere).
std::string slow_rename_library();

}  // namespace attnlab::test
