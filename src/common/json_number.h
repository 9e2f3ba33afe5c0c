// A double as JSON: the number, or null for NaN and infinities (which JSON cannot hold).
#pragma once

#include <cmath>
#include <optional>

#include <nlohmann/json.hpp>

namespace attnlab {

inline nlohmann::json json_number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }
inline nlohmann::json json_number(const std::optional<double>& v) { return v ? json_number(*v) : nlohmann::json(); }

}  // namespace attnlab
