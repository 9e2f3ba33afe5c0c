// YAML plumbing behind run_config.cpp (and the sweep file's parser): loading with shape checks,
// composing files, --set overrides, type-checked scalars and unknown-key detection. Internal to the
// core library; docs/config.md states the rules for users.
#pragma once

#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "attnlab/run_config.h"

namespace attnlab::yaml_io {

/// Parses the YAML file at `path` (with `pipe_allowed`, a pipe too: `--config <(...)`) and checks its
/// shape with check_tree. Throws ConfigError naming the file: missing, a directory, a FIFO (unless
/// `pipe_allowed`), a device or socket (common/input_file.h), unreadable, larger than 16 MiB (so
/// /dev/zero cannot stall it), unparsable, or a check_tree failure.
YAML::Node load_yaml_file(const std::filesystem::path& path, bool pipe_allowed = true);

/// Refuses what yaml-cpp parses but a config must not hold, each a ConfigError starting with
/// `where` (the file, with the line): a key written twice in one mapping (yaml-cpp keeps both and
/// lookups see only the first; named with both lines), a key that is not a scalar (`[a]: 1`),
/// nesting deeper than 32 levels, or more than 100,000 nodes once aliases are expanded (an alias
/// cycle, or a "billion laughs" document that would stall every later walk).
void check_tree(const YAML::Node& root, const std::string& where);

/// `path` merged over its `include:` files (each relative to the including file; later wins). Only
/// `path` itself may be a pipe: an include must be a regular file. Throws ConfigError naming the
/// file on a missing file, one that is not a regular file, a parse error, a check_tree failure or
/// an include cycle.
YAML::Node load_with_includes(const std::filesystem::path& path);

/// Applies "a.b.c=value" (value parsed as YAML and checked with check_tree) to `root`. Throws
/// ConfigError on a malformed one.
void apply_override(YAML::Node& root, const std::string& assignment);

/// Throws ConfigError naming the first key of `root` (full dotted path) not in `known`, with the
/// closest known key as a suggestion.
void reject_unknown_keys(const YAML::Node& root, const std::set<std::string>& known);

/// JSON tree -> YAML tree (objects, arrays, scalars). Floats become their shortest round-trip text
/// (format_float), so the YAML written from it reads back to the same double.
YAML::Node from_json(const nlohmann::json& j);

/// The shortest text that reads back as exactly `value` (3e-4 -> "0.0003", not
/// "0.00029999999999999997"), always with a '.' so YAML 1.1 readers (PyYAML) also see a float:
/// 1 -> "1.0", 1e-8 -> "1.0e-08". Fixed notation for exponents -5 < e < 16, as Python's repr.
std::string format_float(double value);

/// "a mapping", "a list", "nothing" or the scalar quoted (escaped by printable()).
std::string describe(const YAML::Node& node);

/// `text` as is when it is valid UTF-8 without control characters, else as a JSON string literal
/// with invalid bytes replaced by U+FFFD, so an error message that quotes user input prints cleanly.
std::string printable(const std::string& text);

/// Why `text` cannot be written by every writer a run has (JSON, YAML, CSV, logs), or "" when it
/// can: not valid UTF-8 (naming the byte), or a control character (U+0000-U+001F, U+007F).
std::string unwritable_reason(const std::string& text);

/// Throws ConfigError("<path>: <unwritable_reason> in <printable text>") unless `text` is writable.
void require_writable(const std::string& text, const std::string& path);

/// An integer scalar read by the YAML 1.2 core schema: decimal [-+]?[0-9]+ (leading zeros stay
/// decimal: "010" is 10, never octal 8), 0o[0-7]+ or 0x[0-9a-fA-F]+. Throws ConfigError
/// "<path>: expected an integer, got '<text>'" for anything else or a value outside T's range.
int64_t read_int64(const YAML::Node& node, const std::string& path);
uint64_t read_uint64(const YAML::Node& node, const std::string& path);

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, bool>) return "true or false";
  else if constexpr (std::is_integral_v<T>) return "an integer";
  else if constexpr (std::is_floating_point_v<T>) return "a number";
  else return "a string";
}

/// The scalar at `node` as T, or ConfigError("<path>: expected <type>, got <value>"). Integers
/// follow read_int64 / read_uint64; finiteness of floats is validate()'s (it also covers configs
/// built in code).
template <class T>
T read_scalar(const YAML::Node& node, const std::string& path) {
  if (!node.IsScalar()) throw ConfigError(path + ": expected " + type_name<T>() + ", got " + describe(node));
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
    const Wide wide = std::is_signed_v<T> ? Wide(read_int64(node, path)) : Wide(read_uint64(node, path));
    if (wide < Wide(std::numeric_limits<T>::min()) || wide > Wide(std::numeric_limits<T>::max()))
      throw ConfigError(path + ": expected " + type_name<T>() + ", got '" + node.Scalar() + "' (out of range)");
    return static_cast<T>(wide);
  } else {
    try {
      return node.as<T>();
    } catch (const YAML::BadConversion&) {
      throw ConfigError(path + ": expected " + type_name<T>() + ", got " + describe(node));
    }
  }
}

}  // namespace attnlab::yaml_io
