// A libFuzzer input as the file (or directory) the readers take: written under a directory of this
// process, so parallel workers (-jobs) do not share files.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include <sys/stat.h>

namespace attnlab::fuzz {

inline std::string scratch_dir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string d = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/attnlab_lf_" + std::to_string(::getpid());
    ::mkdir(d.c_str(), 0755);
    return d;
  }();
  return dir;
}

inline void write_bytes(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), std::streamsize(size));
}

}  // namespace attnlab::fuzz
