// SHA-256 (OpenSSL): of the tensor files, recorded in state.json, and of state.json itself, recorded
// in state.json.sha256, so a corrupt checkpoint file is detected.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace attnlab::detail {

/// Lower-case hex SHA-256 of the file's bytes. Throws CheckpointError naming the file if it
/// cannot be read.
std::string sha256_file(const std::filesystem::path& file);

/// Lower-case hex SHA-256 of `bytes`.
std::string sha256_hex(std::string_view bytes);

}  // namespace attnlab::detail
