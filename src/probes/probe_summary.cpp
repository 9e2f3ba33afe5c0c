// Per-head means gathered into per-layer and model summaries, and the sink rate.
#include <cmath>

#include "attnlab/probe_measures.h"

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

ProbeSummary probe_summary(const std::vector<LayerProbeSums>& layers, bool has_phantom, bool has_gate) {
  const auto& table = probe_measure_table();
  auto value = [&](const ProbeMeasure& m, double v) { return m.applies(has_phantom, has_gate) ? MeasureValue(v) : std::nullopt; };
  const size_t sink_score = probe_measure_index("sink_score");
  ProbeSummary out;
  std::vector<std::vector<double>> every_head(table.size());  // per measure, every (layer, head)
  for (size_t l = 0; l < layers.size(); ++l) {
    ProbeLayerSummary layer;
    layer.layer = int64_t(l);
    layer.heads.resize(table.size());
    std::vector<double> sink_scores;
    for (size_t i = 0; i < table.size(); ++i) {
      const auto& m = table[i];
      if (m.kind != ProbeMeasure::Kind::per_head) continue;
      const auto heads = head_means(layers[l], m);
      for (double v : heads) layer.heads[i].push_back(value(m, v));
      layer.mean.values[i] = value(m, mean_of(heads));
      every_head[i].insert(every_head[i].end(), heads.begin(), heads.end());
      if (i == sink_score) sink_scores = heads;
    }
    for (size_t i = 0; i < table.size(); ++i)
      if (table[i].kind == ProbeMeasure::Kind::sink_rate)
        layer.mean.values[i] = value(table[i], share_above(sink_scores, kSinkRateThreshold));
    out.layers.push_back(std::move(layer));
  }
  for (size_t i = 0; i < table.size(); ++i) {
    const auto& m = table[i];
    out.model.values[i] = value(m, m.kind == ProbeMeasure::Kind::per_head ? mean_of(every_head[i])
                                                                          : share_above(every_head[sink_score], kSinkRateThreshold));
  }
  return out;
}

}  // namespace attnlab
