// The trainer's checkpointer (docs/checkpoints.md, "Retention"): when a step is saved and which
// checkpoints stay. The loop only asks should_save(); the checkpointer owns checkpoint.* of the config.
#pragma once

#include <cstdint>
#include <set>

#include <torch/optim/optimizer.h>

#include "attnlab/checkpoint.h"
#include "attnlab/run_config.h"

namespace attnlab {

class RunWriter;

/// The log-spaced steps 1, 2, 4, ..., up to checkpoint.log_spaced_until when checkpoint.log_spaced
/// (Pythia-style); empty otherwise. They are saved and kept besides every checkpoint.every, and the
/// activation tracker probes them too.
std::set<int64_t> log_spaced_steps(const CheckpointConfig& config);

/// checkpoint.* as the retention policy: the keep_last newest, the best by val_loss, the log-spaced
/// steps and every multiple of keep_every.
RetentionPolicy retention_policy(const CheckpointConfig& config);

class Checkpointer {
 public:
  explicit Checkpointer(const CheckpointConfig& config);

  /// Whether the state after `step` (1-based) is saved: every checkpoint.every steps, each
  /// log-spaced step, the `last` step of the run, and the step a run `stop`s at (a signal, or
  /// TrainOptions::stop_after_steps), so it resumes from there.
  bool should_save(int64_t step, bool last, bool stop) const;

  /// Saves `state` of `model` and `opt` into the run's checkpoints/ through `writer` and applies
  /// the policy (RunWriter::save_checkpoint); the time it takes counts towards seconds(). Throws as
  /// save_checkpoint does.
  void save(const RunWriter& writer, const GPTImpl& model, const torch::optim::Optimizer& opt, const TrainState& state);

  const RetentionPolicy& policy() const { return policy_; }
  /// Wall seconds spent in save() (final.json's time_s.checkpoint, with the metrics sync before it).
  double seconds() const { return seconds_; }
  void add_seconds(double seconds) { seconds_ += seconds; }

 private:
  int64_t every_;
  RetentionPolicy policy_;
  double seconds_ = 0.0;
};

}  // namespace attnlab
