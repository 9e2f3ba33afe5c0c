// `attnlab report --probes --inject`: the trained-model measurements and junk-injection
// dose-response of SPEC section 4 for every finished run of a sweep, as paper 000 tabulates them.
// Results are cached in each run's probes/ folder (probe_run.h) and reused while their key (checkpoint
// step, tokens, options) matches.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "attnlab/paired_stats.h"
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

/// One finished run of the sweep with its probe and injections.
struct ProbeReportRun {
  std::string name;     ///< relative to the sweep directory, e.g. "micro/baseline/s1"
  std::string tier, variant, arm;
  uint64_t seed = 0;
  std::optional<ProbeResult> probe;   ///< none unless ProbeReportOptions::probes (or when it failed)
  std::vector<InjectResult> inject;   ///< in report_injections' order: cutoffs, then junk kinds
  std::optional<std::string> error;   ///< why the run could not be probed
};

/// The report's probe and injection results: every finished run, in the sweep report's order.
struct ProbeReport {
  std::vector<ProbeReportRun> runs;
  std::vector<double> eps;  ///< the doses every run was injected with
  uint64_t seed = 0;        ///< the junk seed
};

/// Runs (or reuses, probe_run.h's cache) the probe and injections of every finished run. A run that
/// fails (no checkpoint, data missing) is recorded with its error, never dropped.
ProbeReport collect_probe_results(const SweepReport& report, const ProbeReportOptions& options);

/// probes.json: {"runs": [{"name", "tier", "variant", "arm", "seed", "probe": probe.json's object or
/// null, "inject": [injection JSON, ...], "error" (only when the run failed)}], "eps", "seed",
/// "arm_order": the registry's arms, "measures": [{"name", "label", "percent"}] of
/// probe_measure_table()}. tools/plot_probes.py reads it and draws in the orders given here.
nlohmann::json to_json(const ProbeReport& results);

/// Markdown tables per tier: first-key mass, sink rate, read-norm ratio, phantom mass, exposure and
/// gates per arm (mean over seeds of the model-level values; a run without a value for a measure
/// is left out of that cell); dose-response per arm, junk kind and cutoff (mean increase in nats).
/// With `compare_paper`, the paper's 124m / 350m figures beside them, labelled as the paper's scale.
std::string probe_tables_markdown(const ProbeReport& results, bool compare_paper);

/// One paired probe difference (src/report/probe_pairs.cpp): m(arm) - m(baseline) of a model-level
/// probe figure, over the seeds where both runs of a tier and variant were probed (SPEC section 3's
/// pairing applied to section 4's measures; the figure's own unit: a share or a ratio).
struct ProbePair {
  std::string measure;  ///< a probe_measure_table() name, or kSinkStateMeasure
  std::string arm;
  SampleStats stats;
  PairedTests tests;
  std::optional<double> p_holm;  ///< Holm over the group's rows of the same measure (one family each)
};

/// A tier and variant's paired probe differences and, where it has null twins, each measure's
/// floor: the sd of m(twin) - m(original) over every twin of the group (same arm and seed).
/// With `against_plain` (a variant in a tier that also has plain runs, as a grid list gives them:
/// docs/sweeps.md, "Grid lists"), the rows are m(arm, variant) - m(arm), each arm against its own plain
/// runs seed for seed, and the floors are the plain group's.
struct ProbePairGroup {
  std::string tier, variant;
  std::vector<ProbePair> pairs;  ///< measure by measure (paired_probe_measures()' order), arms in the registry's
  std::map<std::string, std::optional<double>> floors;  ///< empty without twins; none where fewer than 2 pair
  bool against_plain = false;
};

/// "sink_state": the probe's massive-activation ratio at position 0 (ProbeResult::sink_state).
extern const char* const kSinkStateMeasure;
/// The measures that are paired, where the probe has them: first-key mass (all, trigger and other
/// queries), sink rate, value drain, residual peak, kurtosis, the largest inf-norm and the
/// massive-activation ratio.
const std::vector<std::string>& paired_probe_measures();
/// Every group's pairs against baseline, then every variant's against the plain runs.
std::vector<ProbePairGroup> pair_probe_results(const ProbeReport& results);
/// One table per group: mean, sd, 95% t interval, p, Holm, sign agreement and n per (measure, arm);
/// with twins, the floor and mean / floor.
std::string probe_pairs_markdown(const std::vector<ProbePairGroup>& groups);

/// The report's files by name: probes.md (probe_tables_markdown, then probe_pairs_markdown) and
/// probes.json (to_json).
std::map<std::string, std::string> probe_report_files(const ProbeReport& results, bool compare_paper);

}  // namespace attnlab
