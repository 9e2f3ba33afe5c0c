// Deliberate damage to a checkpoint that its checksums do not catch: the test edits a file, then
// re-seals it (recomputes the tensor files' sizes and SHA-256 in state.json and state.json's own
// SHA-256 in state.json.sha256, here with OpenSSL directly), as a buggy or foreign writer would
// leave it. What must then refuse the checkpoint are the readers' field and restore checks.
#pragma once

#include <openssl/evp.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "attnlab/safetensors.h"

namespace attnlab::testing {

inline std::string file_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_text_file(const std::filesystem::path& file, const std::string& text) {
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(text.data(), static_cast<std::streamsize>(text.size()));
}

inline std::string sha256_of(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &n, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", digest[i]);
    hex += two;
  }
  return hex;
}

/// Recomputes every checksum of checkpoint `dir` after `edit` changed state.json's JSON.
inline void reseal(const std::filesystem::path& dir, const std::function<void(nlohmann::json&)>& edit = {}) {
  auto state = nlohmann::json::parse(file_text(dir / "state.json"));
  if (edit) edit(state);
  for (const char* name : {"model.safetensors", "optimizer.safetensors"}) {
    const std::string bytes = file_text(dir / name);
    state["files"][name] = {{"sha256", sha256_of(bytes)}, {"bytes", bytes.size()}};
  }
  const std::string text = state.dump(2) + "\n";
  write_text_file(dir / "state.json", text);
  write_text_file(dir / "state.json.sha256", sha256_of(text) + "  state.json\n");
}

/// Rewrites tensor file `name` of checkpoint `dir` after `edit`, then reseals the checkpoint.
inline void edit_tensors(const std::filesystem::path& dir, const std::string& name,
                         const std::function<void(TensorMap&, SafetensorsMetadata&)>& edit) {
  auto contents = read_safetensors(dir / name);
  edit(contents.tensors, contents.metadata);
  write_safetensors(dir / name, contents.tensors, contents.metadata);
  reseal(dir);
}

}  // namespace attnlab::testing
