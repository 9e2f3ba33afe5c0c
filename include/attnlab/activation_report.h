// `attnlab activations --runs <run dirs>` (SPEC section 5): activation_capture.h's
// statistics at every checkpoint of one or more runs, how the dominant channel settles (lock-in
// step, Spearman correlation of each checkpoint's channel ranking with the final one) and how runs
// that differ only in seed agree (Jaccard overlap of their final top-k channels).
//
// Channel ranking: channels ordered by |x_c| of the sink state (position 0 of probe sequence 0),
// per layer. Spearman's rho uses average ranks for ties. The probe batch is the first `sequences`
// validation sequences of each run's own data.val (or --val), at the run's train.seq_len.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "attnlab/activation_capture.h"

namespace attnlab {

class Progress;

struct ActivationScanOptions {
  int64_t sequences = 4;     ///< probe batch size (validation sequences [0, sequences))
  std::string val;           ///< validation shard glob; empty = each run's data.val
  int64_t top_k = 8;         ///< channels listed per state and compared across seeds
  MassiveCriterion massive;
  /// Layer of the heatmap (step x channel at the sink) and the tokens x channels map; -1 = the layer
  /// whose peak max |x_c| is largest at the final checkpoint.
  int64_t layer = -1;
  /// Counts checkpoints as they are scanned (not owned; optional): activations_report() announces
  /// every run's checkpoints first, scan_run() advances it by one per checkpoint.
  Progress* progress = nullptr;
};

struct CheckpointActivations {
  int64_t step = 0;
  ActivationCapture capture;
};

struct RunActivations {
  std::filesystem::path dir;
  std::string tier, arm;
  uint64_t seed = 0;
  double weight_decay = 0.0;
  std::vector<CheckpointActivations> checkpoints;   ///< ascending step, the final one last
  std::vector<std::optional<int64_t>> lock_in;      ///< per layer: lock_in_step of the sink argmax
  std::vector<std::vector<double>> spearman_final;  ///< [layer][checkpoint] rho with the final ranking
  int64_t layer = 0;                                ///< the layer of the maps (options.layer resolved)
  ActivationCapture final_tokens;                   ///< the final checkpoint captured with tokens_abs
};

/// Jaccard overlap of the final top-k sink channels of two runs of one tier and arm.
struct SeedOverlap {
  std::string tier, arm;
  uint64_t seed_a = 0, seed_b = 0;
  std::vector<double> jaccard;  ///< per layer
};

struct ActivationsReport {
  std::vector<RunActivations> runs;
  std::vector<SeedOverlap> overlaps;
  ActivationScanOptions options;
};

/// Scans every checkpoint of the run in `run_dir` (RunDir::checkpoints(); each opened with open_trained).
/// Throws std::runtime_error naming the directory when it has no checkpoint, CheckpointError for a
/// checkpoint that does not load, DataError naming the validation glob when it matches nothing
/// (pass options.val), std::invalid_argument for options.layer outside [-1, n_layer].
RunActivations scan_run(const std::filesystem::path& run_dir, const ActivationScanOptions& options);

/// scan_run for each directory, then the seed overlaps of every pair of runs with equal tier and
/// arm and different seeds. Throws std::invalid_argument for an empty list.
ActivationsReport activations_report(const std::vector<std::filesystem::path>& run_dirs,
                                     const ActivationScanOptions& options);

/// Everything above as JSON (tools/plot_activations.py reads it; its layout is in docs/activations.md).
nlohmann::json activations_json(const ActivationsReport& report);

/// CSV tables by file name: "activations.csv" (one row per run, step, layer and state: sink|peak),
/// "lock_in.csv", "spearman.csv", "seed_overlap.csv".
std::map<std::string, std::string> activations_csv(const ActivationsReport& report);

/// Every file of `attnlab activations` by name: activations_csv() and "activations.json"
/// (activations_json(), indented by one space, newline-terminated).
std::map<std::string, std::string> activations_files(const ActivationsReport& report);

/// The Markdown table `attnlab activations` prints: one row per run and layer with the final
/// checkpoint's sink and peak states (max |x_c|, argmax, max / median, massive or not), the lock-in
/// step and Spearman's rho of the first checkpoint with the final ranking; then one line per seed
/// pair with its per-layer Jaccard overlap of the top-k sink channels.
std::string activations_summary_markdown(const ActivationsReport& report);

}  // namespace attnlab
