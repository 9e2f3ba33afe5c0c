// `attnlab report --probes --inject`: the trained-model measurements and junk-injection
// dose-response of SPEC section 4 for every finished run of a sweep, as paper 000 tabulates them.
// Results are cached in each run's probes/ folder (probe_run.h) and reused while their key (checkpoint
// step, tokens, options) matches.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnlab/probe_run.h"
#include "attnlab/report.h"

namespace attnlab {

class Progress;

struct ProbeReportOptions {
  bool probes = false;  ///< run (or reuse) `probe` on every finished run
  bool inject = false;  ///< run (or reuse) `inject` with both cutoffs, structured and gaussian junk,
                        ///< and gate_direction junk for arms with a projection gate
  ProbeDataOptions data{16, 0, 8, std::nullopt};  ///< N = 16 sequences of the run's seq_len
  std::string data_pattern;                       ///< val shards; empty = each run's data.val
  std::vector<double> eps = {0.2, 0.4, 0.8, 1.6};
  uint64_t seed = 0;  ///< junk seed (the same for every arm)
  std::string device = "cpu";
  Progress* progress = nullptr;  ///< counts the finished runs as each is probed (not owned; optional)
};

/// {"runs": [...], "eps", "seed", "arm_order": the registry's arms, "measures": [{"name", "label",
/// "percent"}] of probe_measure_table()} where each run (finished runs only) is {"name", "tier",
/// "variant", "arm", "seed", "probe": probe JSON (or null), "inject": [injection JSON, ...], "error":
/// text when the run could not be probed}. A run that fails (no checkpoint, data missing) is
/// recorded with its error, never dropped. tools/plot_probes.py draws in the orders given here.
nlohmann::json collect_probe_results(const SweepReport& report, const ProbeReportOptions& options);

/// Markdown tables per tier: first-key mass, sink rate, read-norm ratio, phantom mass, exposure and
/// gates per arm (mean over seeds); dose-response per arm, junk kind and cutoff (mean increase in
/// nats). With `compare_paper`, the paper's 124m / 350m figures beside them, labelled as the
/// paper's scale.
std::string probe_tables_markdown(const nlohmann::json& results, bool compare_paper);

}  // namespace attnlab
