#include "attnlab/progress.h"

#include <unistd.h>

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace attnlab {
namespace {

// One stderr logger for every Progress of the process (spdlog refuses a second one of the same name).
std::shared_ptr<spdlog::logger> progress_logger() {
  if (auto existing = spdlog::get("progress")) return existing;
  return spdlog::stderr_color_mt("progress");
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string format_duration(double seconds) {
  if (!(seconds >= 0)) return "?";
  const auto s = static_cast<int64_t>(seconds);
  return s >= 3600 ? fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60) : fmt::format("{}m{:02d}s", s / 60, s % 60);
}

bool progress_wanted(bool quiet) { return !quiet && ::isatty(STDERR_FILENO) == 1; }

Progress::Progress(std::string what, std::string unit, bool enabled, double min_interval, Sink sink, Clock clock)
    : what_(std::move(what)), unit_(std::move(unit)), enabled_(enabled), min_interval_(min_interval),
      sink_(std::move(sink)), clock_(std::move(clock)) {
  if (!clock_) clock_ = steady_seconds;
  if (enabled_ && !sink_) sink_ = [logger = progress_logger()](const std::string& line) { logger->info("{}", line); };
  start_ = last_line_ = clock_();
}

void Progress::add_total(int64_t n) {
  if (n < 0) throw std::invalid_argument(fmt::format("Progress::add_total: {} items is negative", n));
  total_ += n;
}

void Progress::advance(int64_t n) {
  done_ += n;
  if (!enabled_) return;
  const double now = clock_();
  if (done_ < total_ && now - last_line_ < min_interval_) return;
  last_line_ = now;
  sink_(line());
}

double Progress::eta_seconds() const {
  if (done_ >= total_) return 0.0;
  if (done_ <= 0) return std::nan("");
  return double(total_ - done_) * (clock_() - start_) / double(done_);
}

std::string Progress::line() const {
  const double percent = total_ > 0 ? 100.0 * double(done_) / double(total_) : 100.0;
  const double eta = eta_seconds();
  return fmt::format("{}: {} of {} {} ({:.0f}%), {} elapsed{}", what_, done_, total_, unit_, percent,
                     format_duration(clock_() - start_), done_ >= total_ ? "" : ", ETA " + format_duration(eta));
}

}  // namespace attnlab
