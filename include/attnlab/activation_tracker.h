// The trainer's activation tracker (SPEC section 5, track.activations): one forward pass on a fixed
// probe batch at its own steps, logged to metrics.jsonl as an ActivationRecord. It changes nothing
// the run computes, which is why track.* may change when a run resumes.
#pragma once

#include <cstdint>
#include <set>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "attnlab/batch_sampler.h"
#include "attnlab/run_config.h"
#include "attnlab/run_metrics.h"

namespace attnlab {

class GPTImpl;

class ActivationTracker {
 public:
  /// The probe batch: the first track.activations.sequences sequences of `val`, on `device`. Off
  /// when track.activations.every is 0, or when not `main_rank` (rank 0 alone writes
  /// metrics.jsonl). Throws TrainError (trainer.h) when the batch needs more sequences than `val`
  /// holds, on every rank.
  ActivationTracker(const RunConfig& cfg, const ValidationSet& val, c10::Device device, bool main_rank);

  /// Whether the state after `step` steps is probed: every track.activations.every steps (step 0,
  /// the initial state, included), each log-spaced checkpoint step and the `last` step; never when off.
  bool should_track(int64_t step, bool last) const;

  /// The record of one forward pass of `model` on the probe batch (capture_activations: no
  /// gradient, parameters and random generators untouched); its time counts towards seconds().
  ActivationRecord track(GPTImpl& model, int64_t step);

  /// Wall seconds spent in track() (final.json's time_s.track).
  double seconds() const { return seconds_; }

 private:
  ActivationTrackConfig config_;
  std::set<int64_t> log_spaced_;
  at::Tensor probe_;  ///< [sequences, seq_len] int64; undefined when off
  double seconds_ = 0.0;
};

}  // namespace attnlab
