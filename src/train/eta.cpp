#include "attnlab/eta.h"

#include <limits>
#include <stdexcept>
#include <string>

namespace attnlab {

EtaEstimator::EtaEstimator(int64_t window) : window_(window) {
  if (window < 1) throw std::invalid_argument("EtaEstimator: window must be at least 1, got " + std::to_string(window));
}

void EtaEstimator::record(double seconds) {
  if (!dropped_first_ && intervals_.size() == 1) {  // the loop's warm-up step leaves the mean
    sum_ -= intervals_.front();
    intervals_.pop_front();
    dropped_first_ = true;
  }
  intervals_.push_back(seconds);
  sum_ += seconds;
  if (static_cast<int64_t>(intervals_.size()) > window_) {
    sum_ -= intervals_.front();
    intervals_.pop_front();
  }
}

double EtaEstimator::seconds_per_step() const {
  if (intervals_.empty()) return std::numeric_limits<double>::quiet_NaN();
  return sum_ / double(intervals_.size());
}

double EtaEstimator::remaining_seconds(int64_t remaining_steps) const {
  if (remaining_steps <= 0) return 0.0;
  return double(remaining_steps) * seconds_per_step();
}

}  // namespace attnlab
