// The metrics logger: metrics.jsonl's records and the progress line's cadence (metrics_logger.h).
#include "attnlab/metrics_logger.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "attnlab/progress.h"

namespace attnlab {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int64_t eta_window(const RunConfig& cfg) {
  return std::max({cfg.eval.every, cfg.checkpoint.every, cfg.track.activations.every, int64_t{20}});
}

}  // namespace

MetricsLogger::MetricsLogger(const RunConfig& cfg, std::optional<MetricsLog> log, int64_t first_step)
    : log_(std::move(log)), log_every_(cfg.train.log_every), first_step_(first_step), eta_(eta_window(cfg)),
      last_done_(Clock::now()) {}

bool MetricsLogger::should_print(const StepRecord& r, bool last) const {
  return r.step % log_every_ == 0 || last || r.step == first_step_ + 1 || r.val_loss.has_value();
}

void MetricsLogger::log(const StepRecord& record) {
  const auto t0 = Clock::now();
  if (log_) log_->append(record);
  seconds_ += seconds_since(t0);
}

void MetricsLogger::log(const ScheduleChange& change) {
  if (log_) log_->append(change);
}

void MetricsLogger::log(const ActivationRecord& record) {
  if (log_) log_->append(record);
}

namespace {

// " (trigger 0.1234, other 2.3456)" on an evaluated step of a run with eval.trigger_tokens.
std::string domains_text(const StepRecord& r) {
  if (!r.val_loss_trigger || !r.val_loss_other) return "";
  return fmt::format(" (trigger {:.4f}, other {:.4f})", *r.val_loss_trigger, *r.val_loss_other);
}

}  // namespace

void MetricsLogger::step_done(const StepRecord& r, int64_t total_steps, bool last) {
  const auto now = Clock::now();
  eta_.record(std::chrono::duration<double>(now - last_done_).count());  // with the last checkpoint
  last_done_ = now;
  if (should_print(r, last)) {
    spdlog::info("step {:>6}/{} | loss {:.4f}{} | lr {:.2e} | {:.0f} tok/s{} | ETA {}", r.step, total_steps,
                 r.train_loss, r.val_loss ? fmt::format(" | val {:.4f}{}", *r.val_loss, domains_text(r)) : "", r.lr, r.tokens_per_s,
                 r.mfu ? fmt::format(" | MFU {:.1f}%", 100 * *r.mfu) : "",
                 format_duration(eta_.remaining_seconds(total_steps - r.step)));
  }
  seconds_ += seconds_since(now);
}

void MetricsLogger::sync() {
  if (log_) log_->sync();
}

}  // namespace attnlab
