// metrics.jsonl, the run's append-only log (docs/design.md, "The run directory"): one JSON object per
// line, of three kinds, each a struct below (its one writer is MetricsLog, its one reader
// read_metrics; JSON keys are written in alphabetical order):
//   step record        {"elapsed_s", "grad_norm", "lr"[, "mfu"], "step", "tokens", "tokens_per_s",
//                       "train_loss", "val_loss" (null between evaluations)[, "tasks": {"<name>":
//                       {"acc", "acc_norm", "n", "fingerprint"}} on evaluated steps with eval.tasks]
//                       [, "val_loss_trigger", "val_loss_other" on evaluated steps with
//                       eval.trigger_tokens (null: no target in that domain)]}          StepRecord
//   schedule change    {"type": "schedule_change", "step", "total_steps_before", "total_steps",
//                       "next_lr_before", "next_lr"}                                  ScheduleChange
//   activations        {"type": "activations", "step", "probe_sequences", "massive": {"min_max",
//                       "min_ratio"}, "layers": layers_json()}                        ActivationRecord
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnlab/activation_capture.h"
#include "attnlab/task_file.h"

namespace attnlab {

/// One optimizer step, logged when it is done (the trainer's MetricsLogger).
struct StepRecord {
  int64_t step = 0;                ///< optimizer steps completed (the 1-based index of this one)
  int64_t tokens = 0;              ///< training tokens consumed up to and with this step
  double train_loss = 0.0;         ///< nats/token: mean over the step's micro-batches and ranks
  std::optional<double> val_loss;  ///< nats/token on the validation set; none (null) between evaluations
  double lr = 0.0;                 ///< the learning rate the step used
  double grad_norm = 0.0;          ///< global L2 norm of the gradients before clipping
  double tokens_per_s = 0.0;       ///< the step's throughput (timing: differs from run to run)
  double elapsed_s = 0.0;          ///< wall seconds of the run so far, earlier sessions included (timing)
  std::optional<double> mfu;       ///< model FLOPs utilisation in [0, 1]; none when the device's peak is unknown
  TaskAccuracies tasks;            ///< eval.tasks' accuracies on evaluated steps (docs/downstream.md); else empty, no key
  /// nats/token over the validation targets whose input token is one of eval.trigger_tokens, and over
  /// the others (evaluate.h's domains), on evaluated steps of a run with them; else none, no key.
  /// NaN (written null) for a domain without targets.
  std::optional<double> val_loss_trigger;
  std::optional<double> val_loss_other;
};

/// A resume under another step budget (docs/checkpoints.md, "Resuming under another step budget"):
/// the cosine of the steps still to come is re-shaped. Logged once, at the step resumed from.
struct ScheduleChange {
  int64_t step = 0;                ///< the step resumed from; step + 1 is the next one trained
  int64_t total_steps_before = 0;  ///< the budget the checkpoint was trained under
  int64_t total_steps = 0;         ///< the budget from now on
  double next_lr_before = 0.0;     ///< the learning rate of step + 1 under the old budget
  double next_lr = 0.0;            ///< and under the new one
};

/// One activation-tracking pass (SPEC section 5) as the trainer writes it.
struct ActivationRecord {
  int64_t step = 0;             ///< the model's state after this many steps (0: the initial state)
  int64_t probe_sequences = 0;  ///< validation sequences [0, probe_sequences) in the probe batch
  MassiveCriterion massive;     ///< what counted as a massive activation
  ActivationCapture capture;    ///< its layers are logged (layers_json), sink_abs and tokens_abs are not
};

/// A step record that carries a validation loss.
struct CurvePoint {
  int64_t step = 0;
  int64_t tokens = 0;
  double val_loss = 0.0;  ///< nats/token
};

/// A step record's task accuracies (an evaluated step of a run with eval.tasks).
struct TaskPoint {
  int64_t step = 0;
  int64_t tokens = 0;
  TaskAccuracies tasks;
};

/// A step record's training loss.
struct TrainPoint {
  int64_t step = 0;
  int64_t tokens = 0;       ///< training tokens at that step
  double train_loss = 0.0;  ///< nats/token (the report bins these: kTrainCurvePoints)
};

/// One activation-tracking record: per layer l = 0..n_layer the sink and peak states' statistics
/// (LayerActivations without sink_abs, which the log does not keep).
struct TrackedActivations {
  int64_t step = 0;
  std::vector<LayerActivations> layers;
};

struct MetricsHistory {
  std::vector<CurvePoint> validation;        ///< in file order
  std::vector<TrainPoint> training;          ///< every step record with a train_loss, in file order
  std::vector<TrackedActivations> activations;  ///< by ascending step (stable)
  std::vector<ScheduleChange> schedule_changes;  ///< in file order
  /// Each line read_metrics skipped, as "<file>:<line>: <why>; line skipped" (also logged).
  std::vector<std::string> skipped;
  std::vector<TaskPoint> tasks;              ///< every step record with "tasks", in file order
};

/// The line each record is written as (without the newline): the header's keys, a double in its
/// shortest round-trip form.
nlohmann::json to_json(const StepRecord& record);
nlohmann::json to_json(const ScheduleChange& change);
nlohmann::json to_json(const ActivationRecord& record);

/// Reads a metrics.jsonl. A record of a "type" this build does not know (a later build's) is passed
/// over; a step record without a validation loss adds no validation point. A line it cannot take is
/// skipped with a spdlog warning naming the file and line (MetricsHistory::skipped) and the rest is
/// read: one that does not parse (a write cut short by a crash, nesting or a number beyond
/// json_read.h's limits), that is not an object, or a record whose key has the wrong type (a step
/// record's "step" not an integer, a loss not a number or null) or lacks one the trainer always
/// writes, or whose "tasks" is malformed (task_accuracies_from_json). A step record without "tasks"
/// (a run without eval.tasks, or a build before them) adds no task point. Throws FileError naming the
/// file only when it cannot be opened (input_file.h's check).
MetricsHistory read_metrics(const std::filesystem::path& metrics_jsonl);

/// How MetricsLog::append() meets a failed write (a full disk, a quota, an I/O error): `attempts`
/// tries in all, waiting `first_wait` after the first failure and twice as long after each next one
/// (the defaults: 6 tries over about 8 s). `wait` does the waiting (tests replace it).
struct AppendRetry {
  int attempts = 6;
  std::chrono::milliseconds first_wait{250};
  std::function<void(std::chrono::milliseconds)> wait;  ///< empty: std::this_thread::sleep_for
};

/// The trainer's side: appends records, one line each, each written to the file (write(2)) before
/// append() returns. Opening it for a run resumed at `resume_step` first drops the lines of later
/// steps (logged after the checkpoint the run resumes from), so every step appears once;
/// resume_step = -1 (a fresh start) drops every line, the initial activation record included. A line
/// whose step cannot be read (not JSON, not an object, "step" not an integer) is dropped too, with a
/// warning naming its line: a resume never needs a valid history.
///
/// Every write is checked. A failed append cuts off what it wrote of its line, waits and tries again
/// (`retry`); when every try fails it throws FileError naming the file and the error (strerror), and
/// the run stops: the lines written before stay whole, and a line is never dropped silently.
/// Durability: sync() (fsync) before each checkpoint is saved makes every line up to the step a
/// resume starts from durable; later lines are dropped on resume anyway. Throws FileError naming the
/// file when it cannot be rewritten or opened, or when an append or sync fails.
class MetricsLog {
 public:
  MetricsLog(const std::filesystem::path& path, int64_t resume_step, AppendRetry retry = {});
  MetricsLog(MetricsLog&& other) noexcept;
  MetricsLog& operator=(MetricsLog&&) = delete;
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  ~MetricsLog();

  void append(const StepRecord& record);
  void append(const ScheduleChange& change);
  void append(const ActivationRecord& record);
  /// fsync: every line appended so far survives a crash of the machine.
  void sync();

 private:
  /// Appends to_json()'s line of the record of `step` (named in the error).
  void append_line(const nlohmann::json& record, int64_t step);
  /// One try at writing `line` at the end; 0, or the errno of the failure (its bytes cut off again).
  int try_append(const std::string& line);

  std::filesystem::path path_;
  int fd_ = -1;
  int64_t size_ = 0;          ///< bytes of whole lines in the file
  bool fragment_ = false;     ///< a failed try left bytes that could not be cut off: start a new line
  AppendRetry retry_;
};

}  // namespace attnlab
