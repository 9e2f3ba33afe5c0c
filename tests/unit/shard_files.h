// Writes hand-made llm.c-format shards (256 int32 header, uint16 tokens) into a fresh temp dir,
// byte by byte as llm.c's dev/data/data_common.py write_datafile lays them out, and lets a test
// spoil any field.
#pragma once

#include <ftw.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace attnlab::testing {

struct ShardSpec {
  std::vector<uint16_t> tokens;
  int32_t magic = 20240520;
  int32_t version = 1;
  int64_t claimed = -1;        ///< header[2]; -1: tokens.size()
  int64_t drop_bytes = 0;      ///< cut this many bytes off the end (truncation)
  std::string extra_bytes;     ///< appended after the tokens (trailing garbage)
};

// POSIX calls, not std::filesystem: LibTorch's libtorch.so exports std::filesystem symbols of its
// own, and its remove_all crashed here (a null call) when the linker bound ours to it.
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/attnlab_shards_XXXXXX";
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    auto remove_one = [](const char* p, const struct stat*, int, struct FTW*) { return std::remove(p); };
    ::nftw(path_.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

  /// Writes `name` and returns its full path.
  std::string write_shard(const std::string& name, const ShardSpec& spec) const {
    std::string bytes(256 * 4, '\0');
    const int32_t header[3] = {spec.magic, spec.version,
                               static_cast<int32_t>(spec.claimed < 0 ? spec.tokens.size() : spec.claimed)};
    for (int i = 0; i < 3; ++i) {
      for (int b = 0; b < 4; ++b) bytes[4 * i + b] = static_cast<char>((header[i] >> (8 * b)) & 0xff);
    }
    for (uint16_t t : spec.tokens) {
      bytes.push_back(static_cast<char>(t & 0xff));  // little-endian
      bytes.push_back(static_cast<char>(t >> 8));
    }
    bytes.resize(bytes.size() - static_cast<size_t>(spec.drop_bytes));
    bytes += spec.extra_bytes;
    write_text(name, bytes);
    return file(name);
  }

  void write_text(const std::string& name, const std::string& text) const {
    std::ofstream out(file(name), std::ios::binary);
    out << text;
  }

 private:
  std::string path_;
};

inline std::vector<uint16_t> iota_tokens(size_t n, uint16_t first = 0, uint16_t modulo = 4096) {
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint16_t>((first + i) % modulo);
  return out;
}

}  // namespace attnlab::testing
