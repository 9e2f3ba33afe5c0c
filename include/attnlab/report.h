// `attnlab report`: the paired-seed analysis of a sweep directory (SPEC section 3).
// Every number is a final validation loss in nats/token, or a difference of such losses between
// arms that share tier, seed and validation data; a positive difference means the arm subtracted
// (the second one) is better. Runs with eval.tasks add, per task and metric (acc, acc_norm), the same
// differences over the error rate 1 - accuracy, so positive still means the arm subtracted is better
// (docs/downstream.md). Runs with eval.trigger_tokens add the same differences of their final
// validation loss on the trigger targets and on the others (val_loss_trigger, val_loss_other;
// docs/data.md). Runs that are missing or unfinished are listed, never dropped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnlab/paired_stats.h"
#include "attnlab/paper_figures.h"
#include "attnlab/run_metrics.h"
#include "attnlab/run_state.h"

namespace attnlab {

/// RunRecord::train_curve holds at most this many points: a longer run's training losses are
/// averaged in bins of consecutive steps (each point at its bin's last step), so report.json stays
/// small for any run length.
constexpr size_t kTrainCurvePoints = 512;

/// One run of the sweep directory, finished or not.
struct RunRecord {
  std::string name;     ///< directory relative to the sweep directory, e.g. "micro/baseline/s1"
  std::string tier, arm, variant;
  uint64_t seed = 0;
  RunState state;
  std::vector<CurvePoint> curve;        ///< its validation points (run_metrics.h)
  std::vector<TrainPoint> train_curve;  ///< training losses, binned to at most kTrainCurvePoints, in step order
  /// A run with a local layer (docs/windows.md): the config hash of its config.yaml with the window keys
  /// removed, which is the config hash of its full-attention twin; none without a window or config.yaml.
  std::optional<std::string> full_attention_hash;
  std::string config_hash;  ///< of its config.yaml; empty when it cannot be read

  bool finished() const { return state.status == RunStatus::finished; }
  double final_val_loss() const;    ///< final.json's, nats/token (finished or stale runs)
  const TaskAccuracies& final_tasks() const;  ///< final.json's task accuracies (finished or stale runs; may be empty)
  /// final.json's val_loss_trigger (`trigger`) or val_loss_other, nats/token (finished or stale runs);
  /// none for a run without eval.trigger_tokens or whose domain had no target.
  std::optional<double> final_domain_loss(bool trigger) const;
  int64_t val_tokens() const;       ///< final.json's (finished or stale runs)
  uint64_t val_fingerprint() const; ///< final.json's (finished or stale runs)
};

/// The runs under `sweep_dir`: those its manifest.json lists (with their expected config hash, so a
/// final.json from another config reads as stale), or, without a manifest, every directory holding a
/// config.yaml. Reads final.json and the validation points of metrics.jsonl. Throws
/// std::runtime_error when the directory does not exist or holds no run at all.
std::vector<RunRecord> collect_runs(const std::filesystem::path& sweep_dir);

/// A paired difference of SPEC section 3 as a signed sum of arms' losses, e.g. the zero-option
/// increment L(baseline) - L(sink_logit) is {{"baseline", +1}, {"sink_logit", -1}}.
struct Contrast {
  std::string id;          ///< "zero_option", "filtering_norm", ...: stable key for CSV / JSON
  std::string quantity;    ///< "zero-option increment"
  std::string definition;  ///< "L(baseline) - L(sink_logit)"
  std::vector<std::pair<std::string, int>> terms;
};

/// Every difference of SPEC section 3, in its order: the zero-option increment, the filtering
/// increments (norm, projection), the standalone gains of norm_gate, proj_gate, off_by_one,
/// sink_token and renorm, and the 2x2 overlaps gain(sink_logit) + gain(gate) - gain(combo[2]);
/// then the output gate's (docs/arms.md, "The output gate"): the gains of out_gate and out_gate_elem,
/// L(out_gate) - L(out_gate_elem), L(sink_logit) - L(sink_out_gate), L(proj_gate) - L(out_gate) and
/// the 2x2 overlap of sink_logit and out_gate.
const std::vector<Contrast>& spec_contrasts();

struct SeedValue {
  uint64_t seed = 0;
  double value = 0.0;
};

struct SkippedSeed {
  uint64_t seed = 0;
  std::string reason;  ///< which arm's run is missing or unfinished, or which data differ
};

struct DifferenceResult {
  Contrast contrast;
  SampleStats stats;                 ///< over `pairs` (n = number of seeds paired)
  std::vector<SeedValue> pairs;      ///< one per seed whose runs all finished on the same data
  std::vector<SkippedSeed> skipped;  ///< seeds not paired, and why
  std::optional<PaperFigure> paper;  ///< with --compare-paper, where the paper reports one
  PairedTests tests;                 ///< the paired t, sign-flip and Wilcoxon tests of `pairs` (paired_stats.h)
  /// Figures that need the group's other differences, filled by build_report() once every contrast of
  /// the group is paired (a figure from the group's null A/A pairs, such as a noise floor, belongs
  /// beside these): Holm's adjustment of tests.t->p_value over the family of the group's differences
  /// that have one (every row of its table with a t p-value); none where the t test has no p-value.
  std::optional<double> p_holm;
  /// mean / the group's noise floor (NoiseFloor::stats.sd), where the group has one: how many
  /// null spreads the difference is from 0. Filled by build_report() like p_holm.
  std::optional<double> over_floor;
};

/// What a contrast is taken over: each finished run's value (none: the run has no such value, and
/// its seed is skipped, saying it lacks `name`), and the data the value was measured on (runs pair
/// only when theirs are equal; the skip reason quotes both).
struct PairedQuantity {
  std::string name;  ///< "final validation loss", "task hellaswag acc"
  std::string data_name;  ///< what `data` describes: "validation data", "task items"
  std::function<std::optional<double>(const RunRecord&)> value;
  std::function<std::string(const RunRecord&)> data;
};

/// The final validation loss, on the validation data (val_fingerprint and val_tokens).
PairedQuantity final_loss_quantity();
/// The final validation loss over the trigger targets (`trigger`: val_loss_trigger) or the others
/// (val_loss_other), on the validation data (as final_loss_quantity(); the runs of one sweep share
/// its eval.trigger_tokens); none for a run without it.
PairedQuantity domain_loss_quantity(bool trigger);
/// The error rate 1 - acc (or 1 - acc_norm when `norm`) of task `task` at the last step, on the
/// task's items (its fingerprint and n); none for a run that did not score the task.
PairedQuantity task_error_quantity(const std::string& task, bool norm);

/// The difference `contrast` over the runs of one group (one tier): for every seed that any of its
/// runs has, a pair is formed only when every arm of the contrast has a finished run with that seed,
/// each has the quantity, and all of them share its data (final_loss_quantity(): val_fingerprint and
/// val_tokens); otherwise the seed is skipped, saying why. Fills stats and tests; p_holm is the
/// group's (build_report()).
DifferenceResult pair_contrast(const Contrast& contrast, const std::vector<const RunRecord*>& runs,
                               const PairedQuantity& quantity = final_loss_quantity());

/// Sets p_holm of each of `differences` (one group's): holm_adjust() over their t p-values.
void adjust_family(std::vector<DifferenceResult>& differences);

struct ArmResult {
  std::string arm;
  SampleStats stats;             ///< final validation loss over finished seeds
  std::vector<SeedValue> seeds;  ///< (seed, final val loss) of each finished run
  std::optional<PaperFigure> paper;
};

/// One null (A/A) difference: an arm's null twin (init seed + offset, the same data order) minus the
/// arm's own run at that seed, final validation loss in nats.
struct NullDifference {
  std::string arm;
  uint64_t seed = 0;
  double value = 0.0;
};

/// The noise floor of one group (docs/sweeps.md, "Null pairs"): its null differences and their
/// statistics; stats.sd (none below two pairs) is the floor, the spread of a paired difference
/// between two identical arms, to which each contrast's mean is compared.
struct NoiseFloor {
  std::vector<NullDifference> pairs;  ///< by arm, then seed
  std::vector<std::string> skipped;   ///< twins not paired, and why ("baseline s2: ...")
  SampleStats stats;                  ///< over pairs' values
};

/// The null differences of `twins` (the group's null twin runs) against `runs` (the group's own) in
/// `quantity`: a twin pairs with the finished run of its arm and seed when both have the quantity and
/// finished on the same data (final_loss_quantity(): val_fingerprint, val_tokens); otherwise it is
/// skipped, saying why.
NoiseFloor noise_floor(const std::vector<const RunRecord*>& runs, const std::vector<const RunRecord*>& twins,
                       const PairedQuantity& quantity = final_loss_quantity());


/// One task metric of a group (docs/downstream.md): the arms' mean accuracy and the contrasts over the
/// error rate 1 - accuracy (task_error_quantity), in spec_contrasts()' order, Holm-adjusted among
/// themselves (one family per task and metric).
struct TaskReport {
  std::string task;    ///< the task's name (its file's stem)
  std::string metric;  ///< "acc" or "acc_norm"
  std::vector<ArmResult> arms;  ///< stats: the accuracy over finished seeds that scored the task (paper: none)
  std::vector<DifferenceResult> differences;
};

/// One validation domain of a group (eval.trigger_tokens; docs/data.md): the arms' mean final loss
/// on it and the contrasts over it (domain_loss_quantity), in spec_contrasts()' order, Holm-adjusted
/// among themselves (one family per domain).
struct DomainReport {
  std::string domain;  ///< "val_loss_trigger" or "val_loss_other"
  std::vector<ArmResult> arms;  ///< stats: the loss over finished seeds that have it (paper: none)
  std::vector<DifferenceResult> differences;  ///< over_floor against `noise_floor`, where there is one
  /// The group's null twins in this domain's loss (the floor of its own differences), when the sweep has any.
  std::optional<NoiseFloor> noise_floor;
};

/// The runs of one tier (and, for grids over other keys, one variant).
struct GroupReport {
  std::string tier, variant;
  std::vector<ArmResult> arms;  ///< SPEC section 1's order, then other arms by name
  std::vector<DifferenceResult> differences;
  std::optional<std::string> best_arm;  ///< lowest mean final val loss among arms with a finished run
  std::vector<size_t> runs;             ///< indices into SweepReport::runs
  /// From the group's null twins (variant "<variant>/null"), when the sweep has any: they form no
  /// group of their own.
  std::optional<NoiseFloor> noise_floor;
  /// Per task any finished run of the group scored (by name), acc then acc_norm; empty without tasks.
  std::vector<TaskReport> tasks;
  /// val_loss_trigger then val_loss_other, when any finished run of the group has them; else empty.
  std::vector<DomainReport> domains;
};

struct SweepReport {
  std::filesystem::path sweep_dir;
  bool from_manifest = false;
  bool compare_paper = false;
  std::vector<RunRecord> runs;
  std::vector<GroupReport> groups;  ///< by tier (micro, 10m, 50m, 124m, 350m, then others), then variant
  /// "Zero-option increment under windows" (docs/windows.md, "The report and the sweep"), one per
  /// group of windowed runs whose full-attention twins (RunRecord::full_attention_hash) are in the
  /// sweep: its arms and each twin's as "<arm>@full"; differences window_zero_option (the windowed
  /// group's L(baseline) - L(sink_logit)), full_zero_option (the twins'), window_zero_option_shift
  /// (their difference, seed for seed) and window_cost_<arm> = L(arm, window) - L(arm, full). Its
  /// noise floor is the windowed group's, else that of the group its twins belong to.
  std::vector<GroupReport> windows;
  /// "Variants against the plain runs" (docs/sweeps.md, "Grid lists"), one per group whose variant is
  /// not "" and not windowed, in a tier that also has plain runs (variant "", as a grid list gives
  /// them): its arms and the plain runs of the same arms as "<arm>@plain"; differences
  /// variant_cost_<arm> = L(arm, variant) - L(arm), seed for seed (the same init and data seeds). Its
  /// noise floor is the plain group's.
  std::vector<GroupReport> variants;
};

/// The name a full-attention twin's arm takes in SweepReport::windows: "<arm>@full".
std::string full_attention_arm(const std::string& arm);
/// The name a plain run's arm takes in SweepReport::variants: "<arm>@plain".
std::string plain_variant_arm(const std::string& arm);

/// Collects the runs and computes every group's numbers. Throws as collect_runs() does.
SweepReport build_report(const std::filesystem::path& sweep_dir, bool compare_paper);

/// Tier names in the order micro, 10m, 50m, 124m, 350m, then others in the order given.
std::vector<std::string> ordered_tiers(const std::vector<std::string>& tiers);

/// Renderings: Markdown for the terminal (and report.md), JSON (every number, each seed's value,
/// skipped seeds, validation curves; what tools/plot_report.py reads), and CSV files by name
/// (runs.csv, losses.csv, differences.csv, pairs.csv, paper_table.csv; task_accuracy.csv,
/// task_differences.csv and task_pairs.csv only when a group has tasks).
std::string report_markdown(const SweepReport& report);
nlohmann::json report_json(const SweepReport& report);
std::map<std::string, std::string> report_csv(const SweepReport& report);

/// Writes report.md, report.json and the CSV files into `out_dir` (created). Returns the paths.
std::vector<std::filesystem::path> write_report_files(const SweepReport& report, const std::filesystem::path& out_dir);

/// Runs `python script report_json --out out_dir` (tools/plot_report.py) and returns the exit code.
/// Throws std::runtime_error with what to do when the Python or its matplotlib is missing.
int render_plots(const std::filesystem::path& python, const std::filesystem::path& script,
                 const std::filesystem::path& report_json, const std::filesystem::path& out_dir);

}  // namespace attnlab
