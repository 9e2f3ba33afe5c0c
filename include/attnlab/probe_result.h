// The documents `attnlab probe` and `attnlab inject` produce: typed results with their provenance
// and conventions, and their JSON form (probe.json, inject_<kind>_<cutoff>.json; docs/probes.md).
// Everything else (the files' CSV and Markdown, the cache, the report) reads the typed values; JSON
// is made and read here only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "attnlab/injection.h"
#include "attnlab/probes.h"
#include "attnlab/trained_run.h"

namespace attnlab {

/// probe_model() of a trained run.
/// The massive-activation ratio of a probe (docs/activations.md): the largest, over the residual
/// layers l = 1..n_layer, of max_c |x_c| / median_c |x_c| at the sink state (position 0 of the probe's
/// first sequence; activation_capture.h), and the layer that holds it.
struct SinkStateRatio {
  double max_ratio = 0.0;  ///< +inf when that layer's median is 0 and its max is not
  int64_t layer = 0;
};

struct ProbeResult {
  Provenance provenance;
  std::vector<std::string> conventions;  ///< one line each: positions, reads, every measure's definition
  ProbeSummary summary;
  std::optional<SinkStateRatio> sink_state;  ///< none in probe.json files written before it
  std::vector<int64_t> trigger_tokens;       ///< token ids of the trigger queries; empty = none (older files too)
};

/// inject_model() of a trained run.
struct InjectResult {
  Provenance provenance;
  InjectOptions options;
  std::vector<std::string> conventions;  ///< one line each: positions, reads, junk, draws, loss
  InjectOutcome result;
};

/// {"layers": [{"layer", "heads": {measure: [H]}, "mean": {measure: x}, "sink_rate", per-layer
/// measure: x}], "model": {measure: x, "sink_rate"}}: the per-head measures of probe_measure_table()
/// under "heads" and "mean", the per-layer ones (residual_peak, inf_norm, kurtosis) beside sink_rate,
/// every measure under "model" (the max_* ones only there). A none value, a NaN and an infinity are null. A windowed
/// model's layers also carry "type": "local" | "global", and the summary "by_type": {"local": {..},
/// "global": {..}} (a type the model lacks is null); a model without a window writes neither.
nlohmann::json to_json(const ProbeSummary& summary);

/// Reads to_json()'s object back for a model with `features`: null is none for a measure the model
/// lacks (ProbeMeasure::applies) and NaN for one it has; a layer type must be the model's. Throws
/// std::invalid_argument naming the key when one is missing or of the wrong type, a measure name is
/// not in probe_measure_table(), a measure the arm lacks holds a number, or a layer's heads disagree
/// in number.
ProbeSummary probe_summary_from_json(const nlohmann::json& j, const ProbeFeatures& features);

/// {"kind", "cutoff", "eps", "layers", "per_layer", "seed"}.
nlohmann::json to_json(const InjectOptions& options);
/// Reads it back; throws std::invalid_argument naming the key (or the unknown kind / cutoff).
InjectOptions inject_options_from_json(const nlohmann::json& j);

/// {"clean_loss", "layers", "doses": [{"eps", "loss", "increase"}], "per_layer": [{"layer", "doses"}]
/// (only when measured)}; a NaN or infinite loss is null.
nlohmann::json to_json(const InjectOutcome& outcome);
/// Reads it back (null losses as NaN); throws std::invalid_argument naming the key.
InjectOutcome inject_outcome_from_json(const nlohmann::json& j);

/// {"provenance", "conventions", "trigger_tokens", "summary", "sink_state"}: probe.json.
nlohmann::json to_json(const ProbeResult& probe);
/// Reads probe.json back; the arm's features (sink term, gate) come from the arm registry by
/// provenance.arm. Throws std::invalid_argument naming the key or the unknown arm.
ProbeResult probe_result_from_json(const nlohmann::json& j);

/// {"provenance", "options", "conventions", "result"}: inject_<kind>_<cutoff>.json.
nlohmann::json to_json(const InjectResult& inject);
/// Reads it back; throws std::invalid_argument naming the key.
InjectResult inject_result_from_json(const nlohmann::json& j);

}  // namespace attnlab
