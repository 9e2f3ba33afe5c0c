// The training loop's ETA: remaining steps times a smoothed wall time per step. Each recorded
// interval is the wall time between two consecutive finished steps, so it holds everything the loop
// did in between (evaluation, checkpoint, activation tracking, logging); a mean over a window that
// spans the longest of those periods amortises them instead of letting the ETA jump at every one.
#pragma once

#include <cstdint>
#include <deque>

namespace attnlab {

class EtaEstimator {
 public:
  /// `window`: how many of the most recent step intervals the mean covers (at least 1). The
  /// trainer passes the longest of eval.every, checkpoint.every and track.activations.every (at
  /// least 20), so every periodic cost falls inside the window. Throws std::invalid_argument for
  /// window < 1.
  explicit EtaEstimator(int64_t window);

  /// One more step finished, `seconds` (wall time, >= 0) after the previous one (or after the loop
  /// started). The first interval of a loop carries its warm-up (allocations, caches), so it is
  /// dropped from the mean as soon as a second one exists.
  void record(double seconds);

  /// Mean seconds per step over the window; NaN before the first record().
  double seconds_per_step() const;

  /// `remaining_steps` x seconds_per_step(), in seconds; 0 when no step remains, NaN before the
  /// first record().
  double remaining_seconds(int64_t remaining_steps) const;

 private:
  int64_t window_;
  std::deque<double> intervals_;
  double sum_ = 0.0;
  bool dropped_first_ = false;
};

}  // namespace attnlab
