// The activation tracker: track.activations' cadence and its probe batch (activation_tracker.h).
#include "attnlab/activation_tracker.h"

#include <chrono>

#include <fmt/format.h>

#include "attnlab/activation_capture.h"
#include "attnlab/checkpointer.h"
#include "attnlab/trainer.h"

namespace attnlab {

ActivationTracker::ActivationTracker(const RunConfig& cfg, const ValidationSet& val, c10::Device device, bool main_rank)
    : config_(cfg.track.activations), log_spaced_(log_spaced_steps(cfg.checkpoint)) {
  if (config_.every == 0) return;
  if (config_.sequences > val.num_sequences())
    throw TrainError(fmt::format("track.activations.sequences = {} exceeds the {} validation sequences of {}",
                                 config_.sequences, val.num_sequences(), cfg.data.val));
  if (main_rank) probe_ = val.sequences(0, config_.sequences).x.to(device);
}

bool ActivationTracker::should_track(int64_t step, bool last) const {
  return probe_.defined() && (step % config_.every == 0 || last || log_spaced_.count(step) > 0);
}

ActivationRecord ActivationTracker::track(GPTImpl& model, int64_t step) {
  const auto t0 = std::chrono::steady_clock::now();
  CaptureOptions options;
  options.top_k = config_.top_k;
  options.massive = {config_.massive_max, config_.massive_ratio};
  ActivationRecord record{step, config_.sequences, options.massive, capture_activations(model, probe_, options)};
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return record;
}

}  // namespace attnlab
