#include "attnlab/final_record.h"

#include <limits>

#include <nlohmann/json.hpp>

#include "attnlab/file_error.h"

namespace attnlab {
namespace {

// Typed access that names the key when it is missing or of another type.
class Reader {
 public:
  Reader(const nlohmann::json& j, const std::filesystem::path& origin, std::string prefix = "")
      : j_(j), origin_(origin), prefix_(std::move(prefix)) {
    if (!j_.is_object()) throw FileError(origin_, (prefix_.empty() ? "" : prefix_ + ": ") + "expected a JSON object");
  }
  template <class T>
  T get(const char* key) const {
    const auto it = j_.find(key);
    if (it == j_.end()) throw FileError(origin_, "lacks \"" + prefix_ + key + "\"");
    try {
      return it->template get<T>();
    } catch (const nlohmann::json::exception&) {
      throw FileError(origin_, "\"" + prefix_ + key + "\" has the wrong type (" + it->dump() + ")");
    }
  }
  // A loss: a number, or null where the writer had +inf (never evaluated).
  double loss(const char* key) const {
    const auto it = j_.find(key);
    if (it != j_.end() && it->is_null()) return std::numeric_limits<double>::infinity();
    return get<double>(key);
  }
  Reader section(const char* key) const {
    const auto it = j_.find(key);
    if (it == j_.end()) throw FileError(origin_, "lacks \"" + prefix_ + key + "\"");
    return Reader(*it, origin_, prefix_ + key + ".");
  }
  bool has(const char* key) const { return j_.contains(key); }

 private:
  const nlohmann::json& j_;
  const std::filesystem::path& origin_;
  std::string prefix_;
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
  if (r.parent) j["parent"] = {{"checkpoint", r.parent->checkpoint}, {"step", r.parent->step}};
  return j;
}

FinalRecord final_record_from_json(const nlohmann::json& j, const std::filesystem::path& origin) {
  const Reader in(j, origin);
  FinalRecord r;
  r.final_val_loss = in.get<double>("final_val_loss");
  r.best_val_loss = in.loss("best_val_loss");
  r.steps = in.get<int64_t>("steps");
  r.tokens_seen = in.get<int64_t>("tokens_seen");
  const auto params = in.section("params");
  r.params.total = params.get<int64_t>("total");
  r.params.non_embedding = params.get<int64_t>("non_embedding");
  r.params.arm_extra = params.get<int64_t>("arm_extra");
  r.wall_time_s = in.get<double>("wall_time_s");
  r.git_revision = in.get<std::string>("git_revision");
  r.config_hash = in.get<std::string>("config_hash");
  r.arm = in.get<std::string>("arm");
  r.seed = in.get<uint64_t>("seed");
  r.tier = in.get<std::string>("tier");
  r.device = in.get<std::string>("device");
  // The one key a record may lack: runs finished before data parallelism were single-process.
  if (in.has("world_size")) r.world_size = in.get<int64_t>("world_size");
  r.val_tokens = in.get<int64_t>("val_tokens");
  r.val_fingerprint = in.get<uint64_t>("val_fingerprint");
  const auto t = in.section("time_s");
  r.time_s = {t.get<double>("data"), t.get<double>("compute"), t.get<double>("eval"), t.get<double>("checkpoint"),
              t.get<double>("log"), t.get<double>("track")};
  if (in.has("parent")) {
    const auto p = in.section("parent");
    r.parent = ParentRecord{p.get<std::string>("checkpoint"), p.get<int64_t>("step")};
  }
  return r;
}

}  // namespace attnlab
