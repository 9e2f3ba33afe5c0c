// The one way attnlab parses JSON that comes from a file or a line of one (state.json, config.json
// of a Hugging Face directory, tokenizer.json, metrics.jsonl, final.json, a sweep manifest, the
// probe cache, safetensors headers): with a depth limit and a size limit. nlohmann's DOM is copied,
// compared and printed recursively, so a file nested a million levels deep overflowed the stack
// (SIGSEGV) or grew to gigabytes first; and a number beyond a double (1e400) came out as nlohmann's
// raw "number overflow", naming no file. Here each is a JsonError whose message says what is wrong
// and where in the text, and read_json_file() names the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>

namespace attnlab::detail {

/// Nesting far beyond any file attnlab reads (a Hugging Face tokenizer.json nests about 5 deep).
inline constexpr int kJsonMaxDepth = 64;
/// Larger than any JSON file attnlab reads (the biggest, tokenizer.json, runs to tens of MB).
inline constexpr int64_t kJsonMaxBytes = int64_t{256} << 20;

struct JsonLimits {
  int max_depth = kJsonMaxDepth;      ///< arrays and objects nested at most this deep
  int64_t max_bytes = kJsonMaxBytes;  ///< the text's length at most
};

/// A text that is not JSON attnlab takes. what() says why and at which byte, not in which file:
/// callers name the file (and the line).
struct JsonError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One JSON value parsed from `text`. Throws JsonError for a syntax error ("not valid JSON at byte
/// 12: ..."), nesting deeper than limits.max_depth, a number beyond a double, or a text longer than
/// limits.max_bytes. The depth is checked while parsing, so a deep text never becomes a deep value.
nlohmann::json parse_json(std::string_view text, const JsonLimits& limits = {});

/// parse_json, or a discarded value (is_discarded()) where it would throw: for the readers of
/// append-only logs, which skip a line cut short by a crash.
nlohmann::json parse_json_or_discarded(std::string_view text, const JsonLimits& limits = {});

/// The JSON value in the regular file `file` (input_file.h's check: a FIFO or a directory is refused
/// by what it is). Throws FileError "<file>: <why>" for anything parse_json refuses, for a file
/// larger than limits.max_bytes, and for one that cannot be read.
nlohmann::json read_json_file(const std::filesystem::path& file, const JsonLimits& limits = {});

}  // namespace attnlab::detail
