// Per-head means gathered into per-layer and model summaries (JSON), and the sink rate.
#include <cmath>
#include <map>

#include "attnlab/probe_measures.h"
#include "common/json_number.h"

namespace attnlab {
namespace {

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

std::vector<double> head_means(const LayerProbeSums& layer, const ProbeMeasure& m) {
  std::vector<double> heads;
  for (int64_t h = 0; h < layer.n_head(); ++h) heads.push_back((layer.*m.sums).mean(h));
  return heads;
}

}  // namespace

nlohmann::json probe_summary(const std::vector<LayerProbeSums>& layers, bool has_phantom, bool has_gate) {
  nlohmann::json out = {{"layers", nlohmann::json::array()}, {"model", nlohmann::json::object()}};
  std::map<std::string, std::vector<double>> every_head;
  auto value = [&](const ProbeMeasure& m, double v) { return m.applies(has_phantom, has_gate) ? json_number(v) : nlohmann::json(); };
  const auto& rate = probe_measure("sink_rate");
  for (size_t l = 0; l < layers.size(); ++l) {
    nlohmann::json layer = {{"layer", l}, {"heads", nlohmann::json::object()}, {"mean", nlohmann::json::object()}};
    for (const auto& m : probe_measure_table()) {
      if (m.kind != ProbeMeasure::Kind::per_head) continue;
      const auto heads = head_means(layers[l], m);
      nlohmann::json row = nlohmann::json::array();
      for (double v : heads) row.push_back(value(m, v));
      layer["heads"][m.name] = row;
      layer["mean"][m.name] = value(m, mean_of(heads));
      every_head[m.name].insert(every_head[m.name].end(), heads.begin(), heads.end());
    }
    layer[rate.name] = value(rate, share_above(head_means(layers[l], probe_measure("sink_score")), kSinkRateThreshold));
    out["layers"].push_back(layer);
  }
  for (const auto& m : probe_measure_table())
    if (m.kind == ProbeMeasure::Kind::per_head) out["model"][m.name] = value(m, mean_of(every_head[m.name]));
  out["model"][rate.name] = value(rate, share_above(every_head["sink_score"], kSinkRateThreshold));
  return out;
}

}  // namespace attnlab
