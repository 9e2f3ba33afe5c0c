// The run directory, and the one piece of code that knows its layout (docs/design.md, "The run
// directory"). Everything else asks a RunDir for a file's meaning, never for its path:
//
//   <run>/config.yaml     the resolved RunConfig; written when the trainer claims the directory
//   <run>/metrics.jsonl   step and activation records (run_metrics.h)
//   <run>/checkpoints/    step_NNNNNN/ (checkpoint.h's format; listed and loaded here, saved by RunWriter)
//   <run>/final.json      FinalRecord (final_record.h), once the run has reached its last step
//   <run>/probes/         outputs of analyses of the run (probe, inject), reused while current
//   <run>/run.lock        held by the process that trains the run (its pid and host inside)
//
// Reading never changes the directory. Writing goes through the RunWriter that claim() returns, so
// only the trainer that owns the run writes its files, and only one trainer at a time (docs/runs.md).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnlab/checkpoint.h"
#include "attnlab/file_error.h"
#include "attnlab/final_record.h"
#include "attnlab/run_config.h"
#include "attnlab/run_metrics.h"
#include "attnlab/run_state.h"

namespace attnlab {
namespace detail {
class FileLock;
}

/// Keys (full paths) in which `wanted` differs from `stored` that a run cannot change when it
/// resumes: everything but the step budget (train.max_steps, train.token_budget), what it observes
/// (track.*, is_observation_key) and where it lives (out_dir). Empty: `wanted` may continue the run.
std::vector<std::string> resume_incompatible_keys(const RunConfig& stored, const RunConfig& wanted);

class RunWriter;

class RunDir {
 public:
  explicit RunDir(std::filesystem::path dir);

  /// The one test of what a run directory is: a directory holding config.yaml or checkpoints/ (a
  /// run that import-hf or a test wrote may lack config.yaml). Reads nothing.
  static bool is_run(const std::filesystem::path& path);
  /// The run directory that `path` lies in: `path` itself when is_run(path), or <run> for a path
  /// under <run>/checkpoints/. std::nullopt otherwise (a lone model file).
  static std::optional<RunDir> containing(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return dir_; }
  std::filesystem::path config_file() const { return dir_ / "config.yaml"; }
  std::filesystem::path metrics_file() const { return dir_ / "metrics.jsonl"; }
  std::filesystem::path final_file() const { return dir_ / "final.json"; }
  /// The checkpoints root (checkpoint.h's functions take it).
  std::filesystem::path checkpoints_path() const { return dir_ / "checkpoints"; }
  /// Where the checkpoint of `step` is (or would be): checkpoint_dir(checkpoints_path(), step).
  std::filesystem::path checkpoint_path(int64_t step) const { return checkpoint_dir(checkpoints_path(), step); }
  /// Where analyses of this run keep their outputs.
  std::filesystem::path probes_path() const { return dir_ / "probes"; }
  /// The lock file of claim(); it means something only while a process holds it.
  std::filesystem::path lock_file() const { return dir_ / "run.lock"; }

  /// True once a trainer has claimed the directory (config.yaml exists).
  bool claimed() const;
  /// For a directory without config.yaml: why it cannot be claimed as it stands, with the remedy
  /// ("holds checkpoints/, metrics.jsonl but no config.yaml: ... move it away ..."); "" when it does
  /// not exist or holds nothing but the lock file and the temporary of an interrupted claim.
  std::string unclaimable_reason() const;
  /// config.yaml, typed and checked. Throws FileError naming the file when it is missing, does not
  /// parse or fails load_run_config's checks (the message keeps the key's name and says what to do).
  RunConfig config() const;
  /// final.json; std::nullopt before the run has finished. Throws FileError naming the file and key
  /// when it exists but cannot be read as a FinalRecord (a damaged file is never a default); the
  /// message ends with the remedy (delete it, and `attnlab train` rewrites it from the newest
  /// checkpoint).
  std::optional<FinalRecord> final_record() const;
  /// The process holding the directory's lock (a trainer at work on it); std::nullopt when none.
  /// Reads the lock without taking it. Throws FileError when the lock file cannot be queried.
  std::optional<RunHolder> holder() const;
  /// The checkpoints by ascending step, from their directory names (list_checkpoints).
  std::vector<CheckpointInfo> checkpoints() const;
  /// The newest checkpoint that loads and passes `check` (load_latest: each one skipped is logged
  /// and appended to `warnings`); std::nullopt when the run has none. Throws CheckpointError naming
  /// checkpoints/ and the newest one's problem when none is usable, or as check_own_checkpoint when
  /// it is another run's (refused, not skipped: someone put it there).
  std::optional<LoadedCheckpoint> latest_checkpoint(std::vector<std::string>* warnings = nullptr,
                                                    bool with_optimizer = true, const CheckpointCheck& check = {}) const;
  /// The model of the newest checkpoint that loads into one (load_model), the optimizer unread.
  /// Throws CheckpointError naming the directory when it has no checkpoint, or as latest_checkpoint.
  LoadedModel latest_model(std::vector<std::string>* warnings = nullptr) const;
  /// metrics.jsonl read (read_metrics); empty when the run has logged nothing yet.
  MetricsHistory metrics() const;
  /// Throws CheckpointError naming `checkpoint`, this run and the run it records when a checkpoint
  /// found in this directory is another run's: the run config it records (`recorded`, state.json's
  /// "config") is missing or differs from config.yaml's in a key a resume may not change
  /// (resume_incompatible_keys), e.g. one copied in from a run of another arm or seed. Every reader of
  /// a run's checkpoints goes through it: latest_checkpoint(), latest_model(), open_model() and the
  /// trainer's resume and --branch-from. A directory without config.yaml is not checked; a config.yaml
  /// that cannot be read is logged (spdlog warning) and the check skipped (the trainer refuses it).
  void check_own_checkpoint(const std::filesystem::path& checkpoint, const std::optional<RunConfig>& recorded) const;

  /// Makes the directory this run's: creates it, takes its lock (run.lock, held until the returned
  /// RunWriter is destroyed or the process ends, kill -9 included) and writes config.yaml, or checks
  /// that the config.yaml there may be continued by `cfg` (resume_incompatible_keys) and rewrites it.
  /// `must_be_new` refuses an existing run too (a branch). Throws FileError naming the directory:
  /// when another process holds it (naming that process's pid and host), when it belongs to another
  /// run (naming the differing keys), or when it holds files but no config.yaml (unclaimable_reason).
  RunWriter claim(const RunConfig& cfg, bool must_be_new) const;

 private:
  std::filesystem::path dir_;
};

/// The right to write a claimed run directory; the trainer holds it for the whole run. It holds the
/// directory's lock, so it can be moved but not copied.
class RunWriter {
 public:
  RunWriter(RunWriter&&) noexcept;
  RunWriter& operator=(RunWriter&&) noexcept;
  ~RunWriter();  ///< releases the lock

  const RunDir& dir() const { return dir_; }
  /// Writes final.json atomically (write_file_atomically). Throws FileError.
  void write_final(const FinalRecord& record) const;
  /// metrics.jsonl opened for appending after `resume_step` (MetricsLog, its default retries).
  MetricsLog open_metrics(int64_t resume_step) const;
  /// save_checkpoint() into checkpoints/. Returns the checkpoint directory; throws as it does.
  std::filesystem::path save_checkpoint(const GPTImpl& model, const torch::optim::Optimizer& opt, const TrainState& state,
                                        const RetentionPolicy& policy) const;
  /// save_weights_checkpoint() into checkpoints/ (import-hf: no optimizer state, every checkpoint kept).
  std::filesystem::path save_weights_checkpoint(const GPTImpl& model, const TrainState& state) const;

 private:
  friend class RunDir;
  RunWriter(RunDir dir, detail::FileLock lock);
  RunDir dir_;
  std::unique_ptr<detail::FileLock> lock_;
};

/// The checkpoint directory `dir` (load_checkpoint), checked to belong to the run it lies in, if any
/// (RunDir::containing, check_own_checkpoint). Throws CheckpointError as those do.
LoadedCheckpoint load_run_checkpoint(const std::filesystem::path& dir, bool with_optimizer = true);

/// Every run directory under `root` (one holding config.yaml), sorted, not looking inside
/// checkpoints/; `root` alone when it is itself a run directory (`watch` or `report` given one run).
/// Throws FileError when `root` cannot be read.
std::vector<std::filesystem::path> find_run_dirs(const std::filesystem::path& root);

/// Writes each {file name: contents} into `dir` (created), each file atomically, logging each path.
/// Every analysis command writes its JSON, Markdown and CSV files through this one function. Throws
/// FileError naming the first file that cannot be written (earlier ones stay written).
void write_outputs(const std::filesystem::path& dir, const std::map<std::string, std::string>& files);

}  // namespace attnlab
