// The probe measures of SPEC section 4 as one table (docs/probes.md): their names in files, their
// definitions, which arms they apply to and where their per-head sums accumulate. The summary
// (probe_summary), the CSV columns and per-measure files, probe.md's columns, the report's probe
// table and the plot script's order are all read from it, so a new measure is one row here plus
// its accumulation in accumulate_layer().
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "attnlab/probes.h"

namespace attnlab {

struct ProbeMeasure {
  enum class Kind {
    per_head,    ///< a per-head mean accumulated in LayerProbeSums::*sums
    sink_rate,   ///< per layer and model only: the share of heads whose sink_score > kSinkRateThreshold
    per_layer,   ///< one value per layer (slot 0 of LayerProbeSums::*sums); the model's: the mean over layers
    layer_max,   ///< model only: the largest layer value of the per_layer measure `of`
  };
  /// Null for arms without a sink term / a gate / an output gate, for models without a window, and
  /// for probes without trigger tokens.
  enum class Needs { any_arm, sink, gate, out_gate, window, trigger };

  std::string name;        ///< JSON key, CSV column, probe_<name>.csv
  std::string label;       ///< Markdown column header
  std::string definition;  ///< one line, as probe.json's conventions list it
  Kind kind = Kind::per_head;
  Needs needs = Needs::any_arm;
  bool percent = false;    ///< a share: Markdown shows it in percent, else with 3 decimals
  bool in_tables = true;   ///< a column of probe.md and of the report's table
  HeadMeans LayerProbeSums::*sums = nullptr;  ///< Kind::per_head and per_layer
  std::string of;          ///< Kind::layer_max: the per_layer measure it takes the maximum of
  /// Files written before the measure lack it: they read back with the value none, and the cache
  /// computes them again (check_probe_summary refuses a none where the measure applies).
  bool may_lack = false;

  /// Whether a model with `features` has this measure.
  bool applies(const ProbeFeatures& features) const;
  /// Whether files of a model with (or without) a window list this measure: a window measure only
  /// for windowed models, so a model without a window writes the files it wrote before windows.
  bool listed(bool windowed) const { return needs != Needs::window || windowed; }
};

/// Every measure, in the order files list them.
const std::vector<ProbeMeasure>& probe_measure_table();

/// The row called `name`; throws std::invalid_argument naming it and listing the known names.
const ProbeMeasure& probe_measure(const std::string& name);

/// The index in probe_measure_table() of the row called `name`; throws as probe_measure().
size_t probe_measure_index(const std::string& name);

/// Whether the measure averages the queries that see key 0 (first-key mass and its chance, over all,
/// trigger or other queries; sink score and sink rate). That set differs by layer type: on a local
/// layer of window W (no kept first positions) only queries i < W see key 0, on a global layer every
/// query does. So a windowed model's mean over both types mixes two query sets, and the report reads
/// these measures per layer type only (docs/probes.md, "Under a sliding window").
bool averages_queries_seeing_key0(const ProbeMeasure& measure);

}  // namespace attnlab
