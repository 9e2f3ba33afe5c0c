#include "attnlab/self_check_record.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/json_field.h"
#include "common/json_number.h"

namespace attnlab {
namespace {

// The tensors in the order check_run_within_rule() holds them (half_precision_rule.cpp), which is
// the order a record read back lists them in (a JSON object's keys come back sorted).
constexpr const char* kTensorOrder[] = {"o",  "lse", "phantom mass", "dq",      "dk",
                                        "dv", "d b_h", "d tau_h",    "d w_h", "d c_h"};

/// error / bound, with a NaN error (or a NaN bound) ranking above everything.
double severity(const RuleCheck& c) {
  if (std::isnan(c.error) || std::isnan(c.bound)) return std::numeric_limits<double>::infinity();
  return c.bound > 0 ? c.error / c.bound : std::numeric_limits<double>::infinity();
}

size_t tensor_rank(const std::string& name, const std::string& where) {
  const auto* it = std::find(std::begin(kTensorOrder), std::end(kTensorOrder), name);
  if (it == std::end(kTensorOrder)) throw std::invalid_argument("\"" + where + "\" names no tensor of the rule: '" + name + "'");
  return static_cast<size_t>(it - std::begin(kTensorOrder));
}

}  // namespace

bool SelfCheckResult::passed() const {
  return std::all_of(checks.begin(), checks.end(), [](const RuleCheck& c) { return c.within(); });
}

const RuleCheck& SelfCheckResult::worst() const {
  if (checks.empty()) throw std::logic_error("SelfCheckResult::worst: no checks");
  return *std::max_element(checks.begin(), checks.end(),
                           [](const RuleCheck& a, const RuleCheck& b) { return severity(a) < severity(b); });
}

nlohmann::json to_json(const SelfCheckResult& r) {
  nlohmann::json tensors = nlohmann::json::object();
  for (const auto& c : r.checks) {
    tensors[c.tensor] = {{"error", json_number(c.error)}, {"yardstick", json_number(c.yardstick)},
                         {"bound", json_number(c.bound)}};
  }
  return {{"backend", r.backend},
          {"arm", r.arm},
          {"dtype", r.dtype},
          {"device", r.device},
          {"head_dim", r.head_dim},
          {"shape", r.shape},
          {"rule",
           {{"factor", r.rule.factor},
            {"param_factor", r.rule.param_factor},
            {"floor", r.rule.floor},
            {"lse_floor", r.rule.lse_floor}}},
          {"tensors", tensors},
          {"worst", r.checks.empty() ? "" : r.worst().tensor},
          {"passed", r.passed()},
          {"ms", r.milliseconds}};
}

SelfCheckResult self_check_result_from_json(const nlohmann::json& j, const std::string& where) {
  SelfCheckResult r;
  r.backend = json_field<std::string>(j, "backend", where);
  r.arm = json_field<std::string>(j, "arm", where);
  r.dtype = json_field<std::string>(j, "dtype", where);
  r.device = json_field<std::string>(j, "device", where);
  r.head_dim = json_field<int64_t>(j, "head_dim", where);
  r.shape = json_field<std::vector<int64_t>>(j, "shape", where);
  const auto rule = json_field<nlohmann::json>(j, "rule", where);
  const auto rule_path = detail::json_path(where, "rule");
  r.rule = {json_field<double>(rule, "floor", rule_path), json_field<double>(rule, "factor", rule_path),
            json_field<double>(rule, "param_factor", rule_path), json_field<double>(rule, "lse_floor", rule_path)};
  const auto tensors = json_field<nlohmann::json>(j, "tensors", where);
  const auto tensors_path = detail::json_path(where, "tensors");
  if (!tensors.is_object()) throw std::invalid_argument("\"" + tensors_path + "\" is not a JSON object");
  for (const auto& [name, value] : tensors.items()) {
    const auto path = detail::json_path(tensors_path, name);
    tensor_rank(name, tensors_path);
    auto number = [&](const char* key) {
      return number_or_nan(json_field<nlohmann::json>(value, key, path), "\"" + detail::json_path(path, key) + "\"");
    };
    r.checks.push_back({name, number("error"), number("yardstick"), number("bound")});
  }
  std::sort(r.checks.begin(), r.checks.end(), [&](const RuleCheck& a, const RuleCheck& b) {
    return tensor_rank(a.tensor, tensors_path) < tensor_rank(b.tensor, tensors_path);
  });
  r.milliseconds = json_field<double>(j, "ms", where);
  if (json_field<bool>(j, "passed", where) != r.passed())
    throw std::invalid_argument("\"" + detail::json_path(where, "passed") + "\" contradicts the errors and bounds of \"" +
                                tensors_path + "\"");
  return r;
}

}  // namespace attnlab
