// A test-only LD_PRELOAD library: rename(2) onto a path that contains $ATTNLAB_TEST_SLOW_RENAME_MATCH
// first sleeps $ATTNLAB_TEST_SLOW_RENAME_SECONDS. A checkpoint is published by one rename of its
// directory (docs/checkpoints.md), so with the match "/checkpoints/step_" a rank's checkpoint write
// becomes as slow as on a slow disk, while every other file operation runs as usual
// (tests/e2e/test_distributed_faults.cpp).
#include <dlfcn.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

extern "C" int rename(const char* from, const char* to) {
  using Rename = int (*)(const char*, const char*);
  static const auto real = reinterpret_cast<Rename>(::dlsym(RTLD_NEXT, "rename"));
  const char* match = std::getenv("ATTNLAB_TEST_SLOW_RENAME_MATCH");
  const char* seconds = std::getenv("ATTNLAB_TEST_SLOW_RENAME_SECONDS");
  if (match != nullptr && seconds != nullptr && to != nullptr && std::strstr(to, match) != nullptr) {
    const double s = std::atof(seconds);
    timespec left{static_cast<time_t>(s), static_cast<long>((s - static_cast<double>(static_cast<time_t>(s))) * 1e9)};
    while (::nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
  }
  return real(from, to);
}
