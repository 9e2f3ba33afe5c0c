// libFuzzer target: the first two bytes are the model's vocab_size - 1 (little-endian), the rest one
// shard file (docs/data.md), read without tokenizer.json. A refusal must be a DataError; an accepted
// shard's tokens are all below vocab_size and its size matches its header.
#include <cstdlib>
#include <iostream>

#include "fuzz/readers.h"
#include "input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string dir = attnlab::fuzz::scratch_dir();
  const int64_t vocab = int64_t(data[0] | (data[1] << 8)) + 1;
  std::ofstream(dir + "/vocab.txt", std::ios::trunc) << vocab;
  attnlab::fuzz::write_bytes(dir + "/s_000000.bin", data + 2, size - 2);
  try {
    const auto summary = attnlab::fuzz::read_shards(dir);
    const int64_t n = summary["num_tokens"];
    if (int64_t(size - 2) != attnlab::kShardHeaderBytes + 2 * n) {
      std::cerr << "accepted a shard whose size does not match its header\n";
      std::abort();
    }
    for (int64_t i = 0; i < n; ++i) {
      const size_t at = 2 + size_t(attnlab::kShardHeaderBytes) + 2 * size_t(i);
      if ((data[at] | (data[at + 1] << 8)) >= vocab) {
        std::cerr << "accepted token " << (data[at] | (data[at + 1] << 8)) << " >= vocab_size " << vocab << "\n";
        std::abort();
      }
    }
  } catch (const attnlab::DataError&) {
    // the documented refusal
  } catch (const std::exception& e) {
    std::cerr << "undocumented exception: " << e.what() << "\n";
    std::abort();
  }
  return 0;
}
