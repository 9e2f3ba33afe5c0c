// Progress lines for long commands (activations, probe, inject, report --probes): "what: k of N unit
// (p%), elapsed, ETA", written through spdlog to stderr so that a command's stdout (its tables) stays
// clean. Lines, not a redrawn bar: they read the same in a terminal, a log file and a Slurm output.
// docs/monitoring.md describes them.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace attnlab {

/// "1m05s" below an hour, "2h03m" from one hour on; "?" for NaN or a negative value. `seconds` is
/// wall time in seconds (fractions are truncated).
std::string format_duration(double seconds);

/// True when progress lines should be shown by default: not `quiet` and stderr (where they go) is a
/// terminal. A command run from a script or CI with stderr redirected stays quiet unless asked.
bool progress_wanted(bool quiet);

class Progress {
 public:
  using Sink = std::function<void(const std::string& line)>;
  using Clock = std::function<double()>;  ///< seconds, monotonic

  /// `what` names the job ("probe runs/sl"), `unit` what is counted ("batches"). `enabled` = false
  /// makes every call a no-op (a Progress can always be passed, never null-checked). A line is
  /// written when the count reaches the total and otherwise at most once every `min_interval`
  /// seconds (0: at every advance). `sink` defaults to an spdlog logger on stderr, `clock` to
  /// std::chrono::steady_clock; tests pass their own.
  Progress(std::string what, std::string unit, bool enabled, double min_interval = 2.0, Sink sink = {},
           Clock clock = {});

  /// The loop announces `n` (>= 0) more items of work; the total may grow while it runs (a sweep
  /// report learns each run's size when it gets there). Throws std::invalid_argument for n < 0.
  void add_total(int64_t n);

  /// `n` more items done; writes a line when due (see the constructor).
  void advance(int64_t n = 1);

  int64_t done() const { return done_; }
  int64_t total() const { return total_; }

  /// Seconds left at the mean rate so far: (total - done) x elapsed / done; NaN before the first
  /// item, 0 once done >= total.
  double eta_seconds() const;

  /// The line advance() writes: "probe runs/sl: 3 of 8 batches (38%), 0m12s elapsed, ETA 0m20s".
  std::string line() const;

 private:
  std::string what_, unit_;
  bool enabled_;
  double min_interval_;
  Sink sink_;
  Clock clock_;
  double start_ = 0.0, last_line_ = 0.0;
  int64_t done_ = 0, total_ = 0;
};

}  // namespace attnlab
