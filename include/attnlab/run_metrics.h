// metrics.jsonl, the run's append-only log (docs/design.md, "The run directory"): one JSON object per
// line, either a step record {"step", "tokens", "train_loss", "val_loss" (null between evaluations),
// "lr", "grad_norm", "tokens_per_s", "elapsed_s"[, "mfu"]} or an activation-tracking record
// {"type": "activations", "step", "probe_sequences", "massive", "layers": layers_json()}.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
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

/// The trainer's side: appends records, one line each, flushed at once. Opening it for a run
/// resumed at `resume_step` first drops the lines of later steps (logged after the checkpoint the
/// run resumes from), so every step appears once; resume_step = -1 (a fresh start) drops every line,
/// the initial activation record included. Throws FileError naming the file when it cannot be
/// rewritten or opened, or when an append fails.
class MetricsLog {
 public:
  MetricsLog(const std::filesystem::path& path, int64_t resume_step);
  void append(const nlohmann::json& record);

 private:
  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace attnlab
