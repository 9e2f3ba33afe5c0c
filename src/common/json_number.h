// A double as JSON: the number, or null for NaN and infinities (which JSON cannot hold); and back.
#pragma once

#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace attnlab {

inline nlohmann::json json_number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }
inline nlohmann::json json_number(const std::optional<double>& v) { return v ? json_number(*v) : nlohmann::json(); }

/// The number json_number() wrote: NaN for null (a NaN or an infinity written). Throws
/// std::invalid_argument naming `what` for a value that is neither a number nor null.
inline double number_or_nan(const nlohmann::json& j, const std::string& what) {
  if (j.is_null()) return std::nan("");
  if (!j.is_number()) throw std::invalid_argument(what + " is not a number: " + j.dump());
  return j.get<double>();
}

}  // namespace attnlab
