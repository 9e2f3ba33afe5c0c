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

// Largest of the finite values; NaN when there is none.
double max_of(const std::vector<double>& values) {
  double best = std::nan("");
  for (double v : values)
    if (std::isfinite(v) && !(v <= best)) best = v;
  return best;
}

double share_above(const std::vector<double>& values, double threshold) {
  if (values.empty()) return std::nan("");
  int64_t n = 0;
  for (double v : values) n += v > threshold;
  return double(n) / double(values.size());
}

bool per_head(const ProbeMeasure& m) { return m.kind == ProbeMeasure::Kind::per_head; }
bool per_layer(const ProbeMeasure& m) { return m.kind == ProbeMeasure::Kind::per_layer; }

// A per-head measure's H means, a per-layer one's single value.
std::vector<double> head_means(const LayerProbeSums& layer, const ProbeMeasure& m) {
  std::vector<double> heads;
  const int64_t n = per_head(m) ? layer.n_head() : 1;
  for (int64_t h = 0; h < n; ++h) heads.push_back((layer.*m.sums).mean(h));
  return heads;
}

// [measure][every (layer, head) pooled]; a per-layer measure pools one value per layer.
using HeadValues = std::vector<std::vector<double>>;

// The model rule over the pooled heads (and layers) of some layers: per-head and per-layer measures
// their mean, the sink rate the share of heads above the threshold, a layer maximum the largest.
MeasureValues pooled_means(const HeadValues& pooled, const ProbeFeatures& f) {
  const auto& table = probe_measure_table();
  const size_t sink_score = probe_measure_index("sink_score");
  MeasureValues out;
  for (size_t i = 0; i < table.size(); ++i) {
    const auto& m = table[i];
    double v = 0.0;
    switch (m.kind) {
      case ProbeMeasure::Kind::per_head:
      case ProbeMeasure::Kind::per_layer: v = mean_of(pooled[i]); break;
      case ProbeMeasure::Kind::sink_rate: v = share_above(pooled[sink_score], kSinkRateThreshold); break;
      case ProbeMeasure::Kind::layer_max: v = max_of(pooled[probe_measure_index(m.of)]); break;
    }
    out.values[i] = m.applies(f) ? MeasureValue(v) : std::nullopt;
  }
  return out;
}

// The summary of per-head means heads[layer][measure][head] (NaN where nothing was averaged).
ProbeSummary summary_of_heads(const std::vector<HeadValues>& heads, const ProbeFeatures& f) {
  const auto& table = probe_measure_table();
  auto value = [&](const ProbeMeasure& m, double v) { return m.applies(f) ? MeasureValue(v) : std::nullopt; };
  ProbeSummary out;
  HeadValues every_head(table.size()), by_type[2] = {HeadValues(table.size()), HeadValues(table.size())};
  for (size_t l = 0; l < heads.size(); ++l) {
    ProbeLayerSummary layer;
    layer.layer = int64_t(l);
    layer.heads.resize(table.size());
    if (f.windowed()) layer.local = bool(f.local_layers.at(l));
    for (size_t i = 0; i < table.size(); ++i) {
      const auto& m = table[i];
      if (!per_head(m) && !per_layer(m)) continue;
      if (per_head(m))
        for (double v : heads[l][i]) layer.heads[i].push_back(value(m, v));
      every_head[i].insert(every_head[i].end(), heads[l][i].begin(), heads[l][i].end());
      if (layer.local) by_type[*layer.local][i].insert(by_type[*layer.local][i].end(), heads[l][i].begin(), heads[l][i].end());
    }
    HeadValues own(heads[l].begin(), heads[l].end());
    layer.mean = pooled_means(own, f);
    for (size_t i = 0; i < table.size(); ++i)
      if (table[i].kind == ProbeMeasure::Kind::layer_max) layer.mean.values[i] = std::nullopt;  // model only
    out.layers.push_back(std::move(layer));
  }
  out.model = pooled_means(every_head, f);
  if (f.windowed()) {
    const size_t first = probe_measure_index("first_key_mass");
    if (!by_type[1][first].empty()) out.local = pooled_means(by_type[1], f);
    if (!by_type[0][first].empty()) out.global = pooled_means(by_type[0], f);
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

ProbeSummary probe_summary(const std::vector<LayerProbeSums>& layers, const ProbeFeatures& features) {
  const auto& table = probe_measure_table();
  if (features.windowed() && features.local_layers.size() != layers.size())
    throw std::invalid_argument("probe_summary: " + std::to_string(features.local_layers.size()) + " layer types for " +
                                std::to_string(layers.size()) + " layers");
  std::vector<HeadValues> heads(layers.size(), HeadValues(table.size()));
  for (size_t l = 0; l < layers.size(); ++l)
    for (size_t i = 0; i < table.size(); ++i)
      if (per_head(table[i]) || per_layer(table[i])) heads[l][i] = head_means(layers[l], table[i]);
  return summary_of_heads(heads, features);
}

void check_probe_summary(const ProbeSummary& s, const ProbeFeatures& features, int64_t n_layer, int64_t n_head) {
  const auto& table = probe_measure_table();
  if (int64_t(s.layers.size()) != n_layer)
    inconsistent(std::to_string(s.layers.size()) + " layers, but the model has " + std::to_string(n_layer));
  std::vector<HeadValues> heads(s.layers.size(), HeadValues(table.size()));
  for (size_t l = 0; l < s.layers.size(); ++l) {
    const auto& layer = s.layers[l];
    const std::string at = "layers[" + std::to_string(l) + "]";
    if (layer.layer != int64_t(l)) inconsistent(at + " is numbered " + std::to_string(layer.layer));
    const std::optional<bool> type = features.windowed() ? std::optional<bool>(features.local_layers[l]) : std::nullopt;
    if (layer.local != type) inconsistent(at + " has another layer type than the model's");
    for (size_t i = 0; i < table.size(); ++i) {
      const std::string name = at + "." + table[i].name;
      if (table[i].applies(features) && table[i].kind != ProbeMeasure::Kind::layer_max && !layer.mean.values[i])
        inconsistent(name + " is none: written before the measure");
      if (per_layer(table[i])) {
        check_range(table[i], layer.mean.values[i], name);
        heads[l][i].push_back(layer.mean.values[i] ? *layer.mean.values[i] : std::nan(""));
      }
      if (!per_head(table[i])) continue;
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
  const auto want = summary_of_heads(heads, features);
  auto same_type_means = [&](const std::optional<MeasureValues>& got, const std::optional<MeasureValues>& w, size_t i) {
    if (!got || !w) return !got && !w;
    return same_value(got->values[i], w->values[i]);
  };
  for (size_t i = 0; i < table.size(); ++i) {
    for (size_t l = 0; l < s.layers.size(); ++l)
      if (!same_value(s.layers[l].mean.values[i], want.layers[l].mean.values[i]))
        inconsistent("layers[" + std::to_string(l) + "] " + table[i].name + " is not the mean of its heads");
    if (!same_value(s.model.values[i], want.model.values[i]))
      inconsistent("model " + table[i].name + " is not the mean of every head");
    if (!same_type_means(s.local, want.local, i) || !same_type_means(s.global, want.global, i))
      inconsistent("by_type " + table[i].name + " is not the mean of the heads of its layer type");
  }
}

}  // namespace attnlab
