// SHA-256 of a file (OpenSSL), recorded in state.json so a corrupt checkpoint file is detected.
#pragma once

#include <filesystem>
#include <string>

namespace attnlab::detail {

/// Lower-case hex SHA-256 of the file's bytes. Throws CheckpointError naming the file if it
/// cannot be read.
std::string sha256_file(const std::filesystem::path& file);

}  // namespace attnlab::detail
