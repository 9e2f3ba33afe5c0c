// final.json: what a run reports once it has reached its last step (docs/design.md, "The run
// directory"). The trainer writes it through RunWriter::write_final(); the sweep, the report and
// `attnlab sweep --dry-run` read it through RunDir::final_record(). Every key is always written (but
// those that only some runs have: a branch's "parent", a GPU run's "attention_self_check", the
// "tasks" of a run with eval.tasks, the "val_loss_trigger" / "val_loss_other" of a run with
// eval.trigger_tokens), so a
// reader treats a missing or mistyped key as a damaged file, never as a default.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "attnlab/model_config.h"
#include "attnlab/self_check_record.h"
#include "attnlab/task_file.h"
#include "attnlab/trainer_state.h"

namespace attnlab {

/// Where a run's wall time went, in seconds, summed over every session of the run.
struct TimeSplit {
  double data = 0.0, compute = 0.0, eval = 0.0, checkpoint = 0.0, log = 0.0, track = 0.0;
};

struct FinalRecord {
  double final_val_loss = 0.0;  ///< nats/token on the run's validation set at the last step
  double best_val_loss = 0.0;   ///< lowest evaluated validation loss (nats/token)
  int64_t steps = 0;            ///< optimizer steps
  int64_t tokens_seen = 0;      ///< training tokens
  ParamCounts params;
  double wall_time_s = 0.0;
  std::string git_revision;     ///< of the binary that finished the run
  std::string config_hash;      ///< config_hash() of the run's config (run_config.h)
  std::string arm, tier, device;
  int64_t world_size = 1;        ///< data-parallel ranks that trained it (absent in records of older runs: 1)
  uint64_t seed = 0;
  int64_t val_tokens = 0;        ///< validation targets the loss averages over
  uint64_t val_fingerprint = 0;  ///< ValidationSet::fingerprint(): runs that share it saw the same tokens
  TimeSplit time_s;
  std::optional<ParentRecord> parent;  ///< branch runs only
  /// The first-use attention self-check of the session that finished the run (attention_self_check.h):
  /// runs on CUDA, so a CPU run's record has none (and no key).
  std::optional<SelfCheckResult> attention_self_check;
  /// The eval.tasks accuracies at the last step (docs/downstream.md); empty (and no key) without tasks.
  TaskAccuracies tasks;
  /// With eval.trigger_tokens, the last step's validation loss over the trigger targets (input token
  /// one of them) and over the others, nats/token (keys "val_loss_trigger", "val_loss_other"); none
  /// (and no key) without them, as in records of older runs. NaN (written null): no target in it.
  std::optional<double> val_loss_trigger;
  std::optional<double> val_loss_other;
};

/// The JSON object final.json holds (every key; "parent" only for a branch, "attention_self_check"
/// only where one ran, "tasks" only where tasks were scored, "val_loss_trigger" and
/// "val_loss_other" only with eval.trigger_tokens).
nlohmann::json to_json(const FinalRecord& record);

/// Reads that object back. Throws FileError naming `origin` and the first key that is missing, has
/// the wrong type (a count must be an integer, a loss a number: `"steps": "sixteen"`, 16.5 or
/// `"final_val_loss": null` are refused) or holds a value no run has (a negative count, steps < 1, a
/// negative or non-finite final loss), an "attention_self_check" that self_check_result_from_json
/// refuses, "tasks" that task_accuracies_from_json refuses, or a "val_loss_trigger" /
/// "val_loss_other" that is neither null nor a number >= 0.
FinalRecord final_record_from_json(const nlohmann::json& j, const std::filesystem::path& origin);

}  // namespace attnlab
