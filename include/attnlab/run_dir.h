// The run directory, and the one piece of code that knows its layout (docs/design.md, "The run
// directory"). Everything else asks a RunDir for a file's meaning, never for its path:
//
//   <run>/config.yaml     the resolved RunConfig; written when the trainer claims the directory
//   <run>/metrics.jsonl   step and activation records (run_metrics.h)
//   <run>/checkpoints/    step_NNNNNN/ (checkpoint.h)
//   <run>/final.json      FinalRecord (final_record.h), once the run has reached its last step
//   <run>/probes/         outputs of analyses of the run (probe, inject), reused while current
//
// Reading never changes the directory. Writing goes through the RunWriter that claim() returns, so
// only the trainer that owns the run writes its files.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "attnlab/checkpoint.h"
#include "attnlab/file_error.h"
#include "attnlab/final_record.h"
#include "attnlab/run_config.h"
#include "attnlab/run_metrics.h"

namespace attnlab {

/// Keys (full paths) in which `wanted` differs from `stored` that a run cannot change when it
/// resumes: everything but the step budget (train.max_steps, train.token_budget), what it observes
/// (track.*, is_observation_key) and where it lives (out_dir). Empty: `wanted` may continue the run.
std::vector<std::string> resume_incompatible_keys(const RunConfig& stored, const RunConfig& wanted);

/// The same rule in words, for error messages.
inline constexpr const char* kResumeRule = "only train.max_steps / train.token_budget and track.* may change";

class RunWriter;

class RunDir {
 public:
  explicit RunDir(std::filesystem::path dir);

  /// The run directory that `path` lies in: `path` itself when it holds config.yaml or checkpoints/,
  /// or <run> for a path under <run>/checkpoints/. std::nullopt otherwise (a lone model file).
  static std::optional<RunDir> containing(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return dir_; }
  std::filesystem::path config_file() const { return dir_ / "config.yaml"; }
  std::filesystem::path metrics_file() const { return dir_ / "metrics.jsonl"; }
  std::filesystem::path final_file() const { return dir_ / "final.json"; }
  std::filesystem::path checkpoints_path() const { return checkpoints_dir(dir_); }
  /// Where analyses of this run keep their outputs.
  std::filesystem::path probes_path() const { return dir_ / "probes"; }

  /// True once a trainer has claimed the directory (config.yaml exists).
  bool claimed() const;
  /// config.yaml, typed and checked. Throws FileError naming the file when it is missing, does not
  /// parse or fails load_run_config's checks (the message keeps the key's name).
  RunConfig config() const;
  /// final.json; std::nullopt before the run has finished. Throws FileError naming the file and key
  /// when it exists but cannot be read as a FinalRecord (a damaged file is never a default).
  std::optional<FinalRecord> final_record() const;
  /// The checkpoints by ascending step, from their directory names (list_checkpoints).
  std::vector<CheckpointInfo> checkpoints() const;
  /// metrics.jsonl read (read_metrics); empty when the run has logged nothing yet.
  MetricsHistory metrics() const;

  /// Makes the directory this run's: creates it and writes config.yaml, or checks that the
  /// config.yaml there may be continued by `cfg` (resume_incompatible_keys) and rewrites it.
  /// `must_be_new` refuses an existing run too (a branch). Throws FileError naming the directory and
  /// the differing keys when it belongs to another run, or holds files but no config.yaml.
  RunWriter claim(const RunConfig& cfg, bool must_be_new) const;

 private:
  std::filesystem::path dir_;
};

/// The right to write a claimed run directory; the trainer holds it for the whole run.
class RunWriter {
 public:
  const RunDir& dir() const { return dir_; }
  /// Writes final.json atomically (write_file_atomically). Throws FileError.
  void write_final(const FinalRecord& record) const;
  /// metrics.jsonl opened for appending after `resume_step` (MetricsLog).
  MetricsLog open_metrics(int64_t resume_step) const;

 private:
  friend class RunDir;
  explicit RunWriter(RunDir dir) : dir_(std::move(dir)) {}
  RunDir dir_;
};

/// Every run directory under `root` (one holding config.yaml), sorted, not looking inside
/// checkpoints/. Throws FileError when `root` cannot be read.
std::vector<std::filesystem::path> find_run_dirs(const std::filesystem::path& root);

/// Writes each {file name: contents} into `dir` (created), each file atomically, logging each path.
/// Every analysis command writes its JSON, Markdown and CSV files through this one function. Throws
/// FileError naming the first file that cannot be written (earlier ones stay written).
void write_outputs(const std::filesystem::path& dir, const std::map<std::string, std::string>& files);

}  // namespace attnlab
