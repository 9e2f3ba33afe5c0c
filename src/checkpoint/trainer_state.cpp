// state.json's "extra" object <-> TrainerState (trainer_state.h).
#include "attnlab/trainer_state.h"

#include <cmath>
#include <stdexcept>

#include "common/json_field.h"

namespace attnlab {
namespace {

constexpr const char* kWhere = "extra";

ParentRecord parent_from_json(const nlohmann::json& extra) {
  const auto& j = json_field<nlohmann::json>(extra, "parent", kWhere);
  const std::string where = detail::json_path(kWhere, "parent");
  return {json_field<std::string>(j, "checkpoint", where), json_field<int64_t>(j, "step", where)};
}

ImportRecord import_from_json(const nlohmann::json& extra) {
  const auto& j = json_field<nlohmann::json>(extra, "imported_from", kWhere);
  const std::string where = detail::json_path(kWhere, "imported_from");
  ImportRecord r{json_field<std::string>(j, "path", where), json_field<std::string>(j, "model_type", where)};
  r.hf_config = json_field<nlohmann::json>(j, "hf_config", where);
  if (!r.hf_config.is_object()) throw std::invalid_argument("\"" + where + ".hf_config\" is not a JSON object");
  return r;
}

}  // namespace

nlohmann::json to_json(const ParentRecord& parent) { return {{"checkpoint", parent.checkpoint}, {"step", parent.step}}; }

nlohmann::json to_json(const TrainerState& state) {
  nlohmann::json j = nlohmann::json::object();
  if (state.elapsed_s) j["elapsed_s"] = *state.elapsed_s;
  if (state.parent) j["parent"] = to_json(*state.parent);
  if (const auto& r = state.imported_from)
    j["imported_from"] = {{"path", r->path}, {"model_type", r->model_type}, {"hf_config", r->hf_config}};
  return j;
}

TrainerState trainer_state_from_json(const nlohmann::json& extra) {
  if (!extra.is_object()) throw std::invalid_argument("\"extra\" is not a JSON object");
  TrainerState s;
  if (extra.contains("elapsed_s")) {
    s.elapsed_s = json_field<double>(extra, "elapsed_s", kWhere);
    if (!(std::isfinite(*s.elapsed_s) && *s.elapsed_s >= 0))
      throw std::invalid_argument("\"extra.elapsed_s\" is " + extra["elapsed_s"].dump() + ", not a duration in seconds");
  }
  if (extra.contains("parent")) s.parent = parent_from_json(extra);
  if (extra.contains("imported_from")) s.imported_from = import_from_json(extra);
  return s;
}

}  // namespace attnlab
