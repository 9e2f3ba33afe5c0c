// The trainer's metrics logger: every record into metrics.jsonl (rank 0's MetricsLog, run_metrics.h)
// and the progress line with its ETA at its own steps (docs/monitoring.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "attnlab/eta.h"
#include "attnlab/run_config.h"
#include "attnlab/run_metrics.h"

namespace attnlab {

class MetricsLogger {
 public:
  /// `log`: rank 0's metrics.jsonl; none on the other ranks, which print but write nothing.
  /// `first_step`: the step this session starts after (0 for a fresh run). The ETA averages over
  /// the longest of eval.every, checkpoint.every and track.activations.every (at least 20 steps),
  /// so every periodic cost is amortised in it.
  MetricsLogger(const RunConfig& cfg, std::optional<MetricsLog> log, int64_t first_step);

  /// Whether a step record is printed: every train.log_every steps, the session's first step, the
  /// `last` step of the run and every step that was evaluated.
  bool should_print(const StepRecord& record, bool last) const;

  /// Appends the record to metrics.jsonl (nothing on ranks other than 0). Throws FileError as
  /// MetricsLog::append.
  void log(const StepRecord& record);
  void log(const ScheduleChange& change);
  void log(const ActivationRecord& record);

  /// The step is done: its interval goes into the ETA, and the progress line is printed when
  /// should_print (step, losses, lr, tokens/s, MFU, ETA over the steps left of `total_steps`).
  void step_done(const StepRecord& record, int64_t total_steps, bool last);

  /// metrics.jsonl fsynced: durable up to the last record (before a checkpoint is saved).
  void sync();

  /// Wall seconds spent writing and printing (final.json's time_s.log).
  double seconds() const { return seconds_; }

 private:
  std::optional<MetricsLog> log_;
  int64_t log_every_;
  int64_t first_step_;
  EtaEstimator eta_;
  std::chrono::steady_clock::time_point last_done_;
  double seconds_ = 0.0;
};

}  // namespace attnlab
