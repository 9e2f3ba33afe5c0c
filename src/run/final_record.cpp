#include "attnlab/final_record.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attnlab/file_error.h"
#include "common/json_field.h"

namespace attnlab {
namespace {

// Typed access (json_field.h) whose errors name the file and the key's path.
class Reader {
 public:
  Reader(const nlohmann::json& j, const std::filesystem::path& origin, std::string path = "")
      : j_(j), origin_(origin), path_(std::move(path)) {
    if (!j_.is_object()) throw FileError(origin_, (path_.empty() ? "" : path_ + ": ") + "expected a JSON object");
  }
  template <class T>
  T get(const char* key) const {
    try {
      return json_field<T>(j_, key, path_);
    } catch (const std::invalid_argument& e) {
      throw FileError(origin_, e.what());
    }
  }
  // A value of the right type that no run can have (a negative count, a loss of -1).
  template <class T>
  T at_least(const char* key, T min) const {
    const T v = get<T>(key);
    if (!(v >= min)) throw FileError(origin_, fmt::format("\"{}\" is {}, below {}", detail::json_path(path_, key), v, min));
    return v;
  }
  // A loss: a number, or null where the writer had +inf (never evaluated).
  double loss(const char* key) const {
    const auto it = j_.find(key);
    if (it != j_.end() && it->is_null()) return std::numeric_limits<double>::infinity();
    return get<double>(key);
  }
  // An optional domain loss: absent (none), null (NaN: no target in it) or a number >= 0.
  std::optional<double> domain_loss(const char* key) const {
    if (!has(key)) return std::nullopt;
    if (j_.at(key).is_null()) return std::numeric_limits<double>::quiet_NaN();
    return at_least<double>(key, 0.0);
  }
  Reader section(const char* key) const { return Reader(get<nlohmann::json>(key), origin_, detail::json_path(path_, key)); }
  bool has(const char* key) const { return j_.contains(key); }

 private:
  nlohmann::json j_;
  const std::filesystem::path& origin_;
  std::string path_;
};

}  // namespace

nlohmann::json to_json(const FinalRecord& r) {
  const auto& t = r.time_s;
  nlohmann::json j = {
      {"final_val_loss", r.final_val_loss},
      {"best_val_loss", r.best_val_loss},
      {"steps", r.steps},
      {"tokens_seen", r.tokens_seen},
      {"params", {{"total", r.params.total}, {"non_embedding", r.params.non_embedding}, {"arm_extra", r.params.arm_extra}}},
      {"wall_time_s", r.wall_time_s},
      {"git_revision", r.git_revision},
      {"config_hash", r.config_hash},
      {"arm", r.arm},
      {"seed", r.seed},
      {"tier", r.tier},
      {"device", r.device},
      {"world_size", r.world_size},
      {"val_tokens", r.val_tokens},
      {"val_fingerprint", r.val_fingerprint},
      {"time_s", {{"data", t.data}, {"compute", t.compute}, {"eval", t.eval}, {"checkpoint", t.checkpoint},
                  {"log", t.log}, {"track", t.track}}},
  };
  if (r.parent) j["parent"] = to_json(*r.parent);
  if (r.attention_self_check) j["attention_self_check"] = to_json(*r.attention_self_check);
  if (!r.tasks.empty()) j["tasks"] = to_json(r.tasks);
  for (const auto& [key, value] : {std::pair{"val_loss_trigger", r.val_loss_trigger}, std::pair{"val_loss_other", r.val_loss_other}})
    if (value) j[key] = std::isnan(*value) ? nlohmann::json() : nlohmann::json(*value);  // null: no such target
  return j;
}

FinalRecord final_record_from_json(const nlohmann::json& j, const std::filesystem::path& origin) {
  const Reader in(j, origin);
  FinalRecord r;
  r.final_val_loss = in.at_least<double>("final_val_loss", 0.0);
  if (!std::isfinite(r.final_val_loss)) throw FileError(origin, "\"final_val_loss\" is not finite");
  r.best_val_loss = in.loss("best_val_loss");
  if (!(r.best_val_loss >= 0)) throw FileError(origin, fmt::format("\"best_val_loss\" is {}, below 0", r.best_val_loss));
  r.steps = in.at_least<int64_t>("steps", 1);
  r.tokens_seen = in.at_least<int64_t>("tokens_seen", 0);
  const auto params = in.section("params");
  r.params.total = params.at_least<int64_t>("total", 0);
  r.params.non_embedding = params.at_least<int64_t>("non_embedding", 0);
  r.params.arm_extra = params.at_least<int64_t>("arm_extra", 0);
  r.wall_time_s = in.at_least<double>("wall_time_s", 0.0);
  r.git_revision = in.get<std::string>("git_revision");
  r.config_hash = in.get<std::string>("config_hash");
  r.arm = in.get<std::string>("arm");
  r.seed = in.get<uint64_t>("seed");
  r.tier = in.get<std::string>("tier");
  r.device = in.get<std::string>("device");
  // The one key a record may lack: runs finished before data parallelism were single-process.
  if (in.has("world_size")) r.world_size = in.at_least<int64_t>("world_size", 1);
  r.val_tokens = in.at_least<int64_t>("val_tokens", 0);
  r.val_fingerprint = in.get<uint64_t>("val_fingerprint");
  const auto t = in.section("time_s");
  r.time_s = {t.at_least("data", 0.0),       t.at_least("compute", 0.0), t.at_least("eval", 0.0),
              t.at_least("checkpoint", 0.0), t.at_least("log", 0.0),     t.at_least("track", 0.0)};
  if (in.has("parent")) {
    const auto p = in.section("parent");
    r.parent = ParentRecord{p.get<std::string>("checkpoint"), p.at_least<int64_t>("step", 0)};
  }
  if (in.has("attention_self_check")) {
    try {
      r.attention_self_check = self_check_result_from_json(j.at("attention_self_check"), "attention_self_check");
    } catch (const std::invalid_argument& e) {
      throw FileError(origin, e.what());
    }
  }
  r.val_loss_trigger = in.domain_loss("val_loss_trigger");
  r.val_loss_other = in.domain_loss("val_loss_other");
  if (in.has("tasks")) {
    try {
      r.tasks = task_accuracies_from_json(j.at("tasks"), "tasks");
    } catch (const std::invalid_argument& e) {
      throw FileError(origin, e.what());
    }
  }
  return r;
}

}  // namespace attnlab
