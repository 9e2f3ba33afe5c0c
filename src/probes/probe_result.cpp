// Probe and injection results as JSON and back: the only place their documents are made or read.
#include "attnlab/probe_result.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "attnlab/arm.h"
#include "attnlab/probe_measures.h"
#include "common/json_field.h"
#include "common/json_number.h"

namespace attnlab {
namespace {

using nlohmann::json;

bool per_head(const ProbeMeasure& m) { return m.kind == ProbeMeasure::Kind::per_head; }

using ArmHas = ProbeFeatures;

// A measure's value as written: null where the arm lacks it; a number, or null for NaN, where it has it.
MeasureValue read_value(const ProbeMeasure& m, const json& v, const ArmHas& has, const std::string& where) {
  if (m.applies(has)) return number_or_nan(v, where);
  if (!v.is_null()) throw std::invalid_argument(where + " holds " + v.dump() + ", but the arm has no " + m.name);
  return std::nullopt;
}

// Every key of `obj` names a measure of the table, and every measure `wanted` is there.
void check_measure_keys(const json& obj, bool per_head_only, const std::string& where, bool windowed) {
  if (!obj.is_object()) throw std::invalid_argument("\"" + where + "\" is not a JSON object");
  for (const auto& item : obj.items()) {
    const ProbeMeasure* m = nullptr;
    try {
      m = &probe_measure(item.key());
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where + "." + item.key() + " is not a measure: " + e.what());
    }
    if (per_head_only && !per_head(*m)) throw std::invalid_argument(where + "." + item.key() + " has no per-head values");
  }
  // Files from before a measure lack it (ProbeMeasure::may_lack): it reads as none. Files from before
  // the output gate lack its measures: null (an arm without one) is what they would hold.
  // A model without a window lists no window measure (ProbeMeasure::listed).
  for (const auto& m : probe_measure_table())
    if ((!per_head_only || per_head(m)) && !obj.contains(m.name) && !m.may_lack &&
        m.needs != ProbeMeasure::Needs::out_gate && m.listed(windowed))
      throw std::invalid_argument("lacks \"" + detail::json_path(where, m.name) + "\"");
}

ProbeLayerSummary read_layer(const json& j, const ArmHas& has, const std::string& where) {
  const auto& table = probe_measure_table();
  ProbeLayerSummary layer;
  layer.layer = json_field<int64_t>(j, "layer", where);
  const auto heads = json_field<json>(j, "heads", where);
  const auto mean = json_field<json>(j, "mean", where);
  check_measure_keys(heads, true, where + ".heads", has.windowed());
  check_measure_keys(mean, true, where + ".mean", has.windowed());
  const std::string type = j.value("type", std::string());
  if (has.windowed() != !type.empty() || (!type.empty() && type != "local" && type != "global"))
    throw std::invalid_argument(where + ".type is '" + type + "': expected " +
                                (has.windowed() ? "local or global (a windowed model)" : "none (no window)"));
  if (!type.empty()) layer.local = type == "local";
  layer.heads.resize(table.size());
  size_t n_head = 0;
  for (size_t i = 0; i < table.size(); ++i) {
    const auto& m = table[i];
    const std::string at = where + ".heads." + m.name;
    if (m.kind == ProbeMeasure::Kind::layer_max) continue;  // model only
    if (m.may_lack && !(per_head(m) ? heads : j).contains(m.name)) {  // a file from before the measure: none
      if (per_head(m)) layer.heads[i].assign(n_head, std::nullopt);
      continue;
    }
    if (!per_head(m)) {
      layer.mean.values[i] = read_value(m, json_field<json>(j, m.name, where), has, where + "." + m.name);
      continue;
    }
    const auto row = heads.value(m.name, json());
    if (row.is_null() && !m.applies(has)) {  // a file from before the measure
      layer.heads[i].assign(n_head, std::nullopt);
      continue;
    }
    if (!row.is_array()) throw std::invalid_argument(at + " is not an array");
    if (n_head == 0) n_head = row.size();
    if (row.size() != n_head)
      throw std::invalid_argument(at + " holds " + std::to_string(row.size()) + " heads, not " + std::to_string(n_head));
    for (size_t h = 0; h < row.size(); ++h)
      layer.heads[i].push_back(read_value(m, row[h], has, at + "[" + std::to_string(h) + "]"));
    layer.mean.values[i] = read_value(m, mean.value(m.name, json()), has, where + ".mean." + m.name);
  }
  return layer;
}

json doses_json(const std::vector<DoseLoss>& doses) {
  json out = json::array();
  for (const auto& d : doses)
    out.push_back({{"eps", json_number(d.eps)}, {"loss", json_number(d.loss)}, {"increase", json_number(d.increase)}});
  return out;
}

std::vector<DoseLoss> read_doses(const json& j, const std::string& where) {
  if (!j.is_array()) throw std::invalid_argument(where + " is not an array");
  std::vector<DoseLoss> out;
  for (size_t k = 0; k < j.size(); ++k) {
    const std::string at = where + "[" + std::to_string(k) + "]";
    out.push_back({json_field<double>(j[k], "eps", at), number_or_nan(json_field<json>(j[k], "loss", at), at + ".loss"),
                   number_or_nan(json_field<json>(j[k], "increase", at), at + ".increase")});
  }
  return out;
}

}  // namespace

json to_json(const ProbeSummary& s) {
  const auto& table = probe_measure_table();
  const bool windowed = !s.layers.empty() && s.layers[0].local.has_value();
  json out = {{"layers", json::array()}, {"model", json::object()}};
  for (const auto& layer : s.layers) {
    json l = {{"layer", layer.layer}, {"heads", json::object()}, {"mean", json::object()}};
    if (layer.local) l["type"] = *layer.local ? "local" : "global";
    for (size_t i = 0; i < table.size(); ++i) {
      if (!table[i].listed(windowed) || table[i].kind == ProbeMeasure::Kind::layer_max) continue;
      if (!per_head(table[i])) {
        l[table[i].name] = json_number(layer.mean.values[i]);
        continue;
      }
      json row = json::array();
      for (const auto& v : layer.heads[i]) row.push_back(json_number(v));
      l["heads"][table[i].name] = row;
      l["mean"][table[i].name] = json_number(layer.mean.values[i]);
    }
    out["layers"].push_back(l);
  }
  auto means = [&](const MeasureValues& values) {
    json m = json::object();
    for (size_t i = 0; i < table.size(); ++i)
      if (table[i].listed(windowed)) m[table[i].name] = json_number(values.values[i]);
    return m;
  };
  out["model"] = means(s.model);
  if (windowed) {
    out["by_type"] = {{"local", s.local ? means(*s.local) : json()}, {"global", s.global ? means(*s.global) : json()}};
  }
  return out;
}

ProbeSummary probe_summary_from_json(const json& j, const ProbeFeatures& has) {
  const auto& table = probe_measure_table();
  ProbeSummary s;
  const auto layers = json_field<json>(j, "layers", "summary");
  if (!layers.is_array()) throw std::invalid_argument("summary.layers is not an array");
  for (size_t l = 0; l < layers.size(); ++l)
    s.layers.push_back(read_layer(layers[l], has, "summary.layers[" + std::to_string(l) + "]"));
  auto read_means = [&](const json& obj, const std::string& where) {
    check_measure_keys(obj, false, where, has.windowed());
    MeasureValues values;
    for (size_t i = 0; i < table.size(); ++i)
      if (!table[i].may_lack || obj.contains(table[i].name))
        values.values[i] = read_value(table[i], obj.value(table[i].name, json()), has, where + "." + table[i].name);
    return values;
  };
  s.model = read_means(json_field<json>(j, "model", "summary"), "summary.model");
  if (has.windowed()) {
    const auto by_type = json_field<json>(j, "by_type", "summary");
    for (const char* type : {"local", "global"}) {
      const auto v = by_type.value(type, json());
      if (!v.is_null()) (std::string(type) == "local" ? s.local : s.global) = read_means(v, std::string("summary.by_type.") + type);
    }
  }
  for (size_t l = 0; l < s.layers.size() && has.windowed(); ++l)
    if (l >= has.local_layers.size() || *s.layers[l].local != has.local_layers[l])
      throw std::invalid_argument("summary.layers[" + std::to_string(l) + "].type is not the model's layer type");
  return s;
}

json to_json(const InjectOptions& o) {
  return {{"kind", to_string(o.kind)}, {"cutoff", to_string(o.cutoff)}, {"eps", o.eps},
          {"layers", o.layers},        {"per_layer", o.per_layer},      {"seed", o.seed}};
}

InjectOptions inject_options_from_json(const json& j) {
  const std::string w = "options";
  InjectOptions o;
  o.kind = json_name_field<JunkKind>(j, "kind", w);
  o.cutoff = json_name_field<QuietCutoff>(j, "cutoff", w);
  o.eps = json_field<std::vector<double>>(j, "eps", w);
  o.layers = json_field<std::vector<int64_t>>(j, "layers", w);
  o.per_layer = json_field<bool>(j, "per_layer", w);
  o.seed = json_field<uint64_t>(j, "seed", w);
  return o;
}

json to_json(const InjectOutcome& r) {
  json out = {{"clean_loss", json_number(r.clean_loss)}, {"layers", r.layers}, {"doses", doses_json(r.doses)}};
  if (r.per_layer) {
    out["per_layer"] = json::array();
    for (const auto& pl : *r.per_layer) out["per_layer"].push_back({{"layer", pl.layer}, {"doses", doses_json(pl.doses)}});
  }
  return out;
}

InjectOutcome inject_outcome_from_json(const json& j) {
  const std::string w = "result";
  InjectOutcome r;
  r.clean_loss = number_or_nan(json_field<json>(j, "clean_loss", w), w + ".clean_loss");
  r.layers = json_field<std::vector<int64_t>>(j, "layers", w);
  r.doses = read_doses(json_field<json>(j, "doses", w), w + ".doses");
  if (j.contains("per_layer")) {
    const auto& per_layer = j["per_layer"];
    if (!per_layer.is_array()) throw std::invalid_argument("result.per_layer is not an array");
    r.per_layer.emplace();
    for (size_t k = 0; k < per_layer.size(); ++k) {
      const std::string at = w + ".per_layer[" + std::to_string(k) + "]";
      r.per_layer->push_back(
          {json_field<int64_t>(per_layer[k], "layer", at), read_doses(json_field<json>(per_layer[k], "doses", at), at + ".doses")});
    }
  }
  return r;
}

json to_json(const ProbeResult& p) {
  json j = {{"provenance", to_json(p.provenance)},
            {"conventions", p.conventions},
            {"trigger_tokens", p.trigger_tokens},
            {"summary", to_json(p.summary)}};
  if (p.sink_state)
    j["sink_state"] = {{"max_ratio", json_number(p.sink_state->max_ratio)}, {"layer", p.sink_state->layer}};
  return j;
}

ProbeResult probe_result_from_json(const json& j) {
  ProbeResult p;
  p.provenance = provenance_from_json(json_field<json>(j, "provenance", ""));
  p.conventions = json_field<std::vector<std::string>>(j, "conventions", "");
  const auto& arm = arm_by_name(p.provenance.arm);
  const auto summary = json_field<json>(j, "summary", "");
  if (j.contains("trigger_tokens"))  // files from before trigger tokens: none
    p.trigger_tokens = json_field<std::vector<int64_t>>(j, "trigger_tokens", "");
  ProbeFeatures features{arm.sink != SinkKind::none, arm.gate != GateKind::none, arm.out_gate != OutputGate::none, {},
                         !p.trigger_tokens.empty()};
  // A windowed model's layers carry their types (the cache check compares them with the model's).
  for (const auto& layer : summary.value("layers", json::array()))
    if (layer.is_object() && layer.contains("type")) features.local_layers.push_back(layer["type"] == "local");
  p.summary = probe_summary_from_json(summary, features);
  if (j.contains("sink_state")) {
    const auto& s = j["sink_state"];
    const double ratio = number_or_nan(json_field<json>(s, "max_ratio", "sink_state"), "sink_state.max_ratio");
    // null is the +inf json_number() wrote (a zero median under a nonzero max)
    p.sink_state = SinkStateRatio{std::isnan(ratio) ? std::numeric_limits<double>::infinity() : ratio,
                                  json_field<int64_t>(s, "layer", "sink_state")};
  }
  return p;
}

json to_json(const InjectResult& r) {
  return {{"provenance", to_json(r.provenance)}, {"options", to_json(r.options)}, {"conventions", r.conventions},
          {"result", to_json(r.result)}};
}

InjectResult inject_result_from_json(const json& j) {
  InjectResult r;
  r.provenance = provenance_from_json(json_field<json>(j, "provenance", ""));
  r.options = inject_options_from_json(json_field<json>(j, "options", ""));
  r.conventions = json_field<std::vector<std::string>>(j, "conventions", "");
  r.result = inject_outcome_from_json(json_field<json>(j, "result", ""));
  return r;
}

}  // namespace attnlab
