// LibTorch exports its own std::filesystem; our calls must bind to the system libstdc++ (see
// attnlab_link_stdcxx_first in CMakeLists.txt), or mixed implementations meet in one call.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <filesystem>
#include <string>

namespace {

TEST(LinkOrder, StdFilesystemBindsToTheSystemLibstdcxx) {
  using RemoveAll = std::uintmax_t (*)(const std::filesystem::path&);
  const RemoveAll fn = &std::filesystem::remove_all;
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(fn), &info), 0);
  EXPECT_NE(std::string(info.dli_fname).find("libstdc++"), std::string::npos) << info.dli_fname;
}

}  // namespace
