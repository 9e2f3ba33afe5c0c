// Per-head means gathered into per-layer and model summaries (JSON), and the sink rate.
#include <cmath>
#include <map>

#include "attnlab/probes.h"

namespace attnlab {
namespace {

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

const HeadMeans& measure(const LayerProbeSums& s, const std::string& name) {
  if (name == "first_key_mass") return s.first_key_mass;
  if (name == "sink_score") return s.sink_score;
  if (name == "phantom_mass") return s.phantom_mass;
  if (name == "read_norm_ratio") return s.read_norm_ratio;
  if (name == "exposure") return s.exposure;
  if (name == "gate_mean") return s.gate_mean;
  return s.gate_closed_share;
}

bool applies(const std::string& name, bool has_phantom, bool has_gate) {
  if (name == "phantom_mass") return has_phantom;
  if (name == "gate_mean" || name == "gate_closed_share") return has_gate;
  return true;
}

// Mean of the finite values; NaN when there is none.
double mean_of(const std::vector<double>& values) {
  double sum = 0.0;
  int64_t n = 0;
  for (double v : values)
    if (std::isfinite(v)) sum += v, ++n;
  return n ? sum / double(n) : std::nan("");
}

double share_above(const std::vector<double>& values, double threshold) {
  if (values.empty()) return std::nan("");
  int64_t n = 0;
  for (double v : values) n += v > threshold;
  return double(n) / double(values.size());
}

}  // namespace

const std::vector<std::string>& probe_measures() {
  static const std::vector<std::string> names = {"first_key_mass", "sink_score", "phantom_mass",     "read_norm_ratio",
                                                 "exposure",       "gate_mean",  "gate_closed_share"};
  return names;
}

nlohmann::json probe_summary(const std::vector<LayerProbeSums>& layers, bool has_phantom, bool has_gate) {
  nlohmann::json out = {{"layers", nlohmann::json::array()}, {"model", nlohmann::json::object()}};
  std::map<std::string, std::vector<double>> every_head;
  for (size_t l = 0; l < layers.size(); ++l) {
    nlohmann::json layer = {{"layer", l}, {"heads", nlohmann::json::object()}, {"mean", nlohmann::json::object()}};
    for (const auto& name : probe_measures()) {
      std::vector<double> heads;
      for (int64_t h = 0; h < layers[l].n_head(); ++h) heads.push_back(measure(layers[l], name).mean(h));
      const bool on = applies(name, has_phantom, has_gate);
      nlohmann::json row = nlohmann::json::array();
      for (double v : heads) row.push_back(on ? number_or_null(v) : nlohmann::json());
      layer["heads"][name] = row;
      layer["mean"][name] = on ? number_or_null(mean_of(heads)) : nlohmann::json();
      every_head[name].insert(every_head[name].end(), heads.begin(), heads.end());
    }
    std::vector<double> scores;
    for (int64_t h = 0; h < layers[l].n_head(); ++h) scores.push_back(layers[l].sink_score.mean(h));
    layer["sink_rate"] = number_or_null(share_above(scores, kSinkRateThreshold));
    out["layers"].push_back(layer);
  }
  for (const auto& name : probe_measures())
    out["model"][name] = applies(name, has_phantom, has_gate) ? number_or_null(mean_of(every_head[name])) : nlohmann::json();
  out["model"]["sink_rate"] = number_or_null(share_above(every_head["sink_score"], kSinkRateThreshold));
  return out;
}

}  // namespace attnlab
