// YAML plumbing behind run_config.cpp: composing files, --set overrides, type-checked scalars and
// unknown-key detection. Internal to the core library.
#pragma once

#include <filesystem>
#include <set>
#include <string>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "attnlab/run_config.h"

namespace attnlab::yaml_io {

/// `path` merged over its `include:` files (each relative to the including file; later wins).
/// Throws ConfigError naming the file on a missing file, a parse error or an include cycle.
YAML::Node load_with_includes(const std::filesystem::path& path);

/// Applies "a.b.c=value" (value parsed as YAML) to `root`. Throws ConfigError on a malformed one.
void apply_override(YAML::Node& root, const std::string& assignment);

/// Throws ConfigError naming the first key of `root` (full dotted path) not in `known`, with the
/// closest known key as a suggestion.
void reject_unknown_keys(const YAML::Node& root, const std::set<std::string>& known);

/// JSON tree -> YAML tree (objects, arrays, scalars).
YAML::Node from_json(const nlohmann::json& j);

std::string describe(const YAML::Node& node);

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, bool>) return "true or false";
  else if constexpr (std::is_integral_v<T>) return "an integer";
  else if constexpr (std::is_floating_point_v<T>) return "a number";
  else return "a string";
}

/// The scalar at `node` as T, or ConfigError("<path>: expected <type>, got <value>").
template <class T>
T read_scalar(const YAML::Node& node, const std::string& path) {
  if (!node.IsScalar()) throw ConfigError(path + ": expected " + type_name<T>() + ", got " + describe(node));
  try {
    if constexpr (std::is_unsigned_v<T> && !std::is_same_v<T, bool>) {
      if (!node.Scalar().empty() && node.Scalar()[0] == '-') throw YAML::BadConversion(node.Mark());
    }
    return node.as<T>();
  } catch (const YAML::BadConversion&) {
    throw ConfigError(path + ": expected " + type_name<T>() + ", got '" + node.Scalar() + "'");
  }
}

}  // namespace attnlab::yaml_io
