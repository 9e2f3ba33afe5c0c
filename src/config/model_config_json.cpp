// ModelConfig <-> JSON through the model's key list (config/model_fields.h): the writer is the run
// config's own, the reader checks each value's JSON type.
#include "attnlab/model_config_json.h"

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "attnlab/run_config.h"
#include "config/model_fields.h"

namespace attnlab {
namespace {

using nlohmann::json;

// Reads every key of the list from one JSON object.
struct JsonReader {
  const json& j;

  template <class T>
  void field(const char* key, T& out, detail::Need need) {
    const auto it = j.find(key);
    if (it == j.end()) {
      if (need == detail::Need::required) fail(key, "is missing");
      return;  // the default: a file from before the key
    }
    if constexpr (detail::is_optional_v<T>) {
      if (it->is_null()) return out.reset();
      typename T::value_type value{};
      read(key, *it, value);
      out = value;
    } else {
      read(key, *it, out);
    }
  }

  [[noreturn]] static void fail(const char* key, const std::string& what) {
    throw std::invalid_argument("'" + std::string(key) + "' " + what);
  }
  static void read(const char* key, const json& v, int64_t& out) {
    if (!v.is_number_integer()) fail(key, "is not an integer: " + v.dump());
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      fail(key, "is out of range: " + v.dump());
    out = v.get<int64_t>();
  }
  static void read(const char* key, const json& v, double& out) {
    if (!v.is_number()) fail(key, "is not a number: " + v.dump());
    out = v.get<double>();
  }
  static void read(const char* key, const json& v, bool& out) {
    if (!v.is_boolean()) fail(key, "is not true or false: " + v.dump());
    out = v.get<bool>();
  }
  static void read(const char* key, const json& v, std::string& out) {
    if (!v.is_string()) fail(key, "is not a string: " + v.dump());
    out = v.get<std::string>();
  }
  template <class E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
  static void read(const char* key, const json& v, E& out) {
    std::string text;
    read(key, v, text);
    const auto value = name_table<E>().find(text);
    if (!value) throw std::invalid_argument(name_table<E>().refusal(text, "'" + std::string(key) + "'"));
    out = *value;
  }
};

}  // namespace

json model_config_to_json(const ModelConfig& model) {
  RunConfig run;  // the run config's writer, so both write one model the same way
  run.model = model;
  return to_json(run)["model"];
}

ModelConfig model_config_from_json(const json& j) {
  if (!j.is_object()) throw std::invalid_argument(std::string("is ") + j.type_name() + ", not a JSON object");
  ModelConfig model;
  JsonReader reader{j};
  detail::visit_model_fields(model, reader);
  return model;
}

}  // namespace attnlab
