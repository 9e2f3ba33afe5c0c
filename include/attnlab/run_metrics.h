// metrics.jsonl, the run's append-only log (docs/design.md, "The run directory"): one JSON object per
// line, either a step record {"step", "tokens", "train_loss", "val_loss" (null between evaluations),
// "lr", "grad_norm", "tokens_per_s", "elapsed_s"[, "mfu"]} or an activation-tracking record
// {"type": "activations", "step", "probe_sequences", "massive", "layers": layers_json()}.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnlab/activation_capture.h"

namespace attnlab {

/// A step record that carries a validation loss.
struct CurvePoint {
  int64_t step = 0;
  int64_t tokens = 0;
  double val_loss = 0.0;  ///< nats/token
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
};

/// Reads a metrics.jsonl. A line that does not parse (a write cut short by a crash) is skipped; a
/// step record without a validation loss adds no validation point. Throws FileError naming the file when it cannot be
/// opened, or when an activation record lacks a key the trainer always writes.
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
/// resume_step = -1 (a fresh start) drops every line, the initial activation record included.
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

  void append(const nlohmann::json& record);
  /// fsync: every line appended so far survives a crash of the machine.
  void sync();

 private:
  /// One try at writing `line` at the end; 0, or the errno of the failure (its bytes cut off again).
  int try_append(const std::string& line);

  std::filesystem::path path_;
  int fd_ = -1;
  int64_t size_ = 0;          ///< bytes of whole lines in the file
  bool fragment_ = false;     ///< a failed try left bytes that could not be cut off: start a new line
  AppendRetry retry_;
};

}  // namespace attnlab
