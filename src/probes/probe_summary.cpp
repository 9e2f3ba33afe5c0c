// Per-head means gathered into per-layer and model summaries, and the sink rate.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

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

// The summary of per-head means heads[layer][measure][head] (NaN where nothing was averaged).
ProbeSummary summary_of_heads(const std::vector<std::vector<std::vector<double>>>& heads, bool has_phantom,
                              bool has_gate, bool has_out_gate) {
  const auto& table = probe_measure_table();
  auto value = [&](const ProbeMeasure& m, double v) {
    return m.applies(has_phantom, has_gate, has_out_gate) ? MeasureValue(v) : std::nullopt;
  };
  const size_t sink_score = probe_measure_index("sink_score");
  ProbeSummary out;
  std::vector<std::vector<double>> every_head(table.size());  // per measure, every (layer, head)
  for (size_t l = 0; l < heads.size(); ++l) {
    ProbeLayerSummary layer;
    layer.layer = int64_t(l);
    layer.heads.resize(table.size());
    for (size_t i = 0; i < table.size(); ++i) {
      const auto& m = table[i];
      if (m.kind != ProbeMeasure::Kind::per_head) continue;
      for (double v : heads[l][i]) layer.heads[i].push_back(value(m, v));
      layer.mean.values[i] = value(m, mean_of(heads[l][i]));
      every_head[i].insert(every_head[i].end(), heads[l][i].begin(), heads[l][i].end());
    }
    for (size_t i = 0; i < table.size(); ++i)
      if (table[i].kind == ProbeMeasure::Kind::sink_rate)
        layer.mean.values[i] = value(table[i], share_above(heads[l][sink_score], kSinkRateThreshold));
    out.layers.push_back(std::move(layer));
  }
  for (size_t i = 0; i < table.size(); ++i) {
    const auto& m = table[i];
    out.model.values[i] = value(m, m.kind == ProbeMeasure::Kind::per_head ? mean_of(every_head[i])
                                                                          : share_above(every_head[sink_score], kSinkRateThreshold));
  }
  return out;
}

bool same_value(const MeasureValue& a, const MeasureValue& b) {
  if (!a || !b) return !a && !b;
  if (std::isnan(*a) || std::isnan(*b)) return std::isnan(*a) && std::isnan(*b);
  return std::fabs(*a - *b) <= 1e-12 * std::max(1.0, std::fabs(*b));
}

[[noreturn]] void inconsistent(const std::string& what) {
  throw std::invalid_argument("probe summary: " + what);
}

// Every value a share of attention or of heads lies in [0, 1] (1e-4 above 1 allowed: a share sums
// up to T float32 probabilities); the read-norm ratio is >= 0.
void check_range(const ProbeMeasure& m, const MeasureValue& v, const std::string& where) {
  if (!v || std::isnan(*v)) return;
  if (!std::isfinite(*v) || *v < 0 || (m.percent && *v > 1 + 1e-4))
    inconsistent(where + " = " + std::to_string(*v) + " is outside " + (m.percent ? "[0, 1]" : "[0, inf)"));
}

}  // namespace

ProbeSummary probe_summary(const std::vector<LayerProbeSums>& layers, bool has_phantom, bool has_gate,
                           bool has_out_gate) {
  const auto& table = probe_measure_table();
  std::vector<std::vector<std::vector<double>>> heads(layers.size(), std::vector<std::vector<double>>(table.size()));
  for (size_t l = 0; l < layers.size(); ++l)
    for (size_t i = 0; i < table.size(); ++i)
      if (table[i].kind == ProbeMeasure::Kind::per_head) heads[l][i] = head_means(layers[l], table[i]);
  return summary_of_heads(heads, has_phantom, has_gate, has_out_gate);
}

void check_probe_summary(const ProbeSummary& s, bool has_phantom, bool has_gate, int64_t n_layer, int64_t n_head,
                         bool has_out_gate) {
  const auto& table = probe_measure_table();
  if (int64_t(s.layers.size()) != n_layer)
    inconsistent(std::to_string(s.layers.size()) + " layers, but the model has " + std::to_string(n_layer));
  std::vector<std::vector<std::vector<double>>> heads(s.layers.size(), std::vector<std::vector<double>>(table.size()));
  for (size_t l = 0; l < s.layers.size(); ++l) {
    const auto& layer = s.layers[l];
    const std::string at = "layers[" + std::to_string(l) + "]";
    if (layer.layer != int64_t(l)) inconsistent(at + " is numbered " + std::to_string(layer.layer));
    for (size_t i = 0; i < table.size(); ++i) {
      if (table[i].kind != ProbeMeasure::Kind::per_head) continue;
      const auto& row = layer.heads.at(i);
      if (int64_t(row.size()) != n_head)
        inconsistent(at + "." + table[i].name + " has " + std::to_string(row.size()) + " heads, but the model has " +
                     std::to_string(n_head));
      for (const auto& v : row) {
        check_range(table[i], v, at + "." + table[i].name);
        heads[l][i].push_back(v ? *v : std::nan(""));
      }
    }
  }
  // The means and sink rates must be those of the per-head values they summarise.
  const auto want = summary_of_heads(heads, has_phantom, has_gate, has_out_gate);
  for (size_t i = 0; i < table.size(); ++i) {
    for (size_t l = 0; l < s.layers.size(); ++l)
      if (!same_value(s.layers[l].mean.values[i], want.layers[l].mean.values[i]))
        inconsistent("layers[" + std::to_string(l) + "] " + table[i].name + " is not the mean of its heads");
    if (!same_value(s.model.values[i], want.model.values[i]))
      inconsistent("model " + table[i].name + " is not the mean of every head");
  }
}

}  // namespace attnlab
