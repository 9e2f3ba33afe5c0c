// The one check every reader of user input makes before it opens a path that a user named, or that
// a glob or an include expanded to: that it is a regular file. Opening a FIFO for reading blocks
// until some process writes to it (a FIFO in a shard glob hung `train` forever), a directory opens
// and then fails every read ("cannot read: Success"), and /dev/zero never ends; so such paths are
// refused by what they are, before any open.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace attnlab::detail {

/// What a path is, in words for an error: "a directory", "a FIFO (named pipe)", "a socket", "a
/// character device", "a block device", "a regular file", "a symbolic link to nothing", "missing".
std::string describe_file_kind(const std::filesystem::path& path);

/// Why `path` cannot be read as a regular file ("does not exist", "is a FIFO (named pipe), not a
/// regular file", ...), or "" when it is one: for readers that throw their own kind of error.
std::string regular_file_problem(const std::filesystem::path& path);

/// Throws FileError naming `path` unless it is, after symbolic links, a regular file: "does not
/// exist", or "is a FIFO (named pipe), not a regular file" (and so on for the other kinds).
void require_regular_file(const std::filesystem::path& path);

/// False when nothing is at `path`; true for a regular file; FileError (as require_regular_file)
/// for anything else. For optional inputs (a directory's tokenizer.json, a cached result).
bool regular_file_exists(const std::filesystem::path& path);

/// The whole content of the regular file `path` (checked as require_regular_file). Throws FileError
/// naming it when it holds more than `max_bytes` (saying both sizes) or cannot be read.
std::string read_regular_file(const std::filesystem::path& path, int64_t max_bytes);

/// As read_regular_file, but `path` may also be a pipe (`--config <(...)`, whose /dev/fd path is
/// one): it is opened without blocking, so a named FIFO that nobody writes to reads as empty
/// instead of hanging, then read to its end (at most `max_bytes`). Other kinds are refused.
std::string read_file_or_pipe(const std::filesystem::path& path, int64_t max_bytes);

}  // namespace attnlab::detail
