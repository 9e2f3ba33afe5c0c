// Typed reads of a JSON object's keys for the readers of the files attnlab writes (cached analysis
// results): a missing key or a value of another type is a std::invalid_argument naming the key,
// never a default.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "attnlab/name_table.h"

namespace attnlab {

namespace detail {

/// "where.key", or "key" at the top level (`where` empty).
inline std::string json_path(const std::string& where, const std::string& key) {
  return where.empty() ? key : where + "." + key;
}

/// What a T is, for an error message.
template <class T>
const char* json_kind() {
  if constexpr (std::is_same_v<T, bool>) return "true or false";
  else if constexpr (std::is_unsigned_v<T>) return "a non-negative integer";
  else if constexpr (std::is_integral_v<T>) return "an integer";
  else if constexpr (std::is_floating_point_v<T>) return "a number";
  else if constexpr (std::is_same_v<T, std::string>) return "a string";
  else return "a value of the expected shape";
}

}  // namespace detail

/// j[key], `where` being the path of `j` in its file ("" for the top level, "summary.layers[0]");
/// throws std::invalid_argument naming the key's path, as `lacks "where.key"` or `"where.key" has
/// the wrong type (<value>, not <kind>)`, when `j` is not an object, lacks the key, or the value is
/// not a T (an integer must be one: 16.5 and true are refused, as are negative values for an
/// unsigned T).
template <class T>
T json_field(const nlohmann::json& j, const std::string& key, const std::string& where) {
  if (!j.is_object()) throw std::invalid_argument((where.empty() ? "the file" : "\"" + where + "\"") + " is not a JSON object");
  const auto path = detail::json_path(where, key);
  const auto it = j.find(key);
  if (it == j.end()) throw std::invalid_argument("lacks \"" + path + "\"");
  bool exact = true;
  if constexpr (std::is_same_v<T, bool>) exact = it->is_boolean();
  else if constexpr (std::is_unsigned_v<T>) exact = it->is_number_unsigned();
  else if constexpr (std::is_integral_v<T>) exact = it->is_number_integer();
  else if constexpr (std::is_floating_point_v<T>) exact = it->is_number();
  try {
    if (exact) return it->template get<T>();
  } catch (const nlohmann::json::exception&) {
  }
  throw std::invalid_argument("\"" + path + "\" has the wrong type (" + it->dump() + ", not " + detail::json_kind<T>() + ")");
}

/// j[key] as one of the names of enum E's table (name_table.h): a string (as json_field), of which
/// any other throws std::invalid_argument `"where.key": '<text>' is not one of <names>`.
template <class E>
E json_name_field(const nlohmann::json& j, const std::string& key, const std::string& where) {
  const auto text = json_field<std::string>(j, key, where);
  if (const auto value = name_table<E>().find(text)) return *value;
  throw std::invalid_argument(name_table<E>().refusal(text, "\"" + detail::json_path(where, key) + "\""));
}

/// j[key] as json_field<T>, or none where it is null.
template <class T>
std::optional<T> json_optional_field(const nlohmann::json& j, const std::string& key, const std::string& where) {
  if (j.is_object() && j.contains(key) && j.at(key).is_null()) return std::nullopt;
  return json_field<T>(j, key, where);
}

}  // namespace attnlab
