// Typed reads of a JSON object's keys for the readers of the files attnlab writes (cached analysis
// results): a missing key or a value of another type is a std::invalid_argument naming the key,
// never a default.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace attnlab {

/// j[key] of `where` (e.g. "provenance"); throws std::invalid_argument naming where.key when `j` is
/// not an object, lacks the key, or the value is not a T (an integer must be one: 16.5 and true are
/// refused, as are negative values for an unsigned T).
template <class T>
T json_field(const nlohmann::json& j, const std::string& key, const std::string& where) {
  if (!j.is_object()) throw std::invalid_argument(where + " is not a JSON object");
  const auto it = j.find(key);
  if (it == j.end()) throw std::invalid_argument(where + " lacks \"" + key + "\"");
  bool exact = true;
  if constexpr (std::is_same_v<T, bool>) exact = it->is_boolean();
  else if constexpr (std::is_unsigned_v<T>) exact = it->is_number_unsigned();
  else if constexpr (std::is_integral_v<T>) exact = it->is_number_integer();
  else if constexpr (std::is_floating_point_v<T>) exact = it->is_number();
  try {
    if (exact) return it->template get<T>();
  } catch (const nlohmann::json::exception&) {
  }
  throw std::invalid_argument(where + "." + key + " has the wrong type: " + it->dump());
}

/// j[key] as json_field<T>, or none where it is null.
template <class T>
std::optional<T> json_optional_field(const nlohmann::json& j, const std::string& key, const std::string& where) {
  if (j.is_object() && j.contains(key) && j.at(key).is_null()) return std::nullopt;
  return json_field<T>(j, key, where);
}

}  // namespace attnlab
