#include "attnlab/run_metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "attnlab/file_error.h"
#include "common/durable_file.h"
#include "common/input_file.h"
#include "common/json_field.h"
#include "common/json_read.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

TrackedActivations tracked_from_json(const nlohmann::json& j, const fs::path& origin) {
  try {
    TrackedActivations t;
    t.step = j.at("step").get<int64_t>();
    for (const auto& layer : j.at("layers")) {
      LayerActivations a;
      a.layer = layer.at("layer").get<int64_t>();
      a.sink = activation_stats_from_json(layer.at("sink"));
      a.peak = activation_stats_from_json(layer.at("peak"));
      a.peak_sequence = layer.at("peak").at("sequence").get<int64_t>();
      a.peak_position = layer.at("peak").at("position").get<int64_t>();
      t.layers.push_back(std::move(a));
    }
    return t;
  } catch (const nlohmann::json::exception& e) {
    throw FileError(origin, std::string("an activation record is incomplete: ") + e.what());
  }
}

ScheduleChange schedule_change_from_json(const nlohmann::json& j, const fs::path& origin) {
  try {
    const std::string w;
    return {json_field<int64_t>(j, "step", w), json_field<int64_t>(j, "total_steps_before", w),
            json_field<int64_t>(j, "total_steps", w), json_field<double>(j, "next_lr_before", w),
            json_field<double>(j, "next_lr", w)};
  } catch (const std::invalid_argument& e) {
    throw FileError(origin, std::string("a schedule_change record ") + e.what());
  }
}

TaskAccuracies tasks_from_json(const nlohmann::json& j, int64_t step, const fs::path& origin) {
  try {
    return task_accuracies_from_json(j, "tasks");
  } catch (const std::invalid_argument& e) {
    throw FileError(origin, fmt::format("the step record of step {}: {}", step, e.what()));
  }
}

nlohmann::json optional_number(const std::optional<double>& x) { return x ? nlohmann::json(*x) : nlohmann::json(); }

}  // namespace

nlohmann::json to_json(const StepRecord& r) {
  nlohmann::json j = {{"step", r.step},         {"tokens", r.tokens},       {"train_loss", r.train_loss},
                      {"val_loss", optional_number(r.val_loss)},          {"lr", r.lr},
                      {"grad_norm", r.grad_norm}, {"tokens_per_s", r.tokens_per_s}, {"elapsed_s", r.elapsed_s}};
  if (r.mfu) j["mfu"] = *r.mfu;
  if (!r.tasks.empty()) j["tasks"] = to_json(r.tasks);
  return j;
}

nlohmann::json to_json(const ScheduleChange& c) {
  return {{"type", "schedule_change"},        {"step", c.step},       {"total_steps_before", c.total_steps_before},
          {"total_steps", c.total_steps}, {"next_lr_before", c.next_lr_before}, {"next_lr", c.next_lr}};
}

nlohmann::json to_json(const ActivationRecord& r) {
  return {{"type", "activations"},
          {"step", r.step},
          {"probe_sequences", r.probe_sequences},
          {"massive", {{"min_max", r.massive.min_max}, {"min_ratio", r.massive.min_ratio}}},
          {"layers", layers_json(r.capture)}};
}

MetricsHistory read_metrics(const fs::path& metrics_jsonl) {
  detail::require_regular_file(metrics_jsonl);  // a FIFO would block the open, a directory fail each read
  std::ifstream in(metrics_jsonl);
  if (!in) throw FileError(metrics_jsonl, "cannot read");
  MetricsHistory h;
  for (std::string line; std::getline(in, line);) {
    const auto j = detail::parse_json_or_discarded(line);
    if (j.is_discarded() || !j.is_object()) continue;
    const std::string type = j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : "";
    if (type == "activations") {
      h.activations.push_back(tracked_from_json(j, metrics_jsonl));
      continue;
    }
    if (type == "schedule_change") {
      h.schedule_changes.push_back(schedule_change_from_json(j, metrics_jsonl));
      continue;
    }
    if (j.contains("type")) continue;  // a record of a later build: no step record
    const int64_t step = j.value("step", int64_t{0}), tokens = j.value("tokens", int64_t{0});
    if (j.value("val_loss", nlohmann::json()).is_number()) h.validation.push_back({step, tokens, j["val_loss"].get<double>()});
    if (j.value("train_loss", nlohmann::json()).is_number()) h.training.push_back({step, tokens, j["train_loss"].get<double>()});
    if (j.contains("tasks")) h.tasks.push_back({step, tokens, tasks_from_json(j["tasks"], step, metrics_jsonl)});
  }
  std::stable_sort(h.activations.begin(), h.activations.end(),
                   [](const TrackedActivations& a, const TrackedActivations& b) { return a.step < b.step; });
  return h;
}

MetricsLog::MetricsLog(const fs::path& path, int64_t resume_step, AppendRetry retry)
    : path_(path), retry_(std::move(retry)) {
  if (!retry_.wait) retry_.wait = [](std::chrono::milliseconds ms) { std::this_thread::sleep_for(ms); };
  retry_.attempts = std::max(retry_.attempts, 1);
  if (detail::regular_file_exists(path)) {
    std::ifstream in(path);
    std::string line, kept;
    int64_t dropped = 0;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const auto j = detail::parse_json_or_discarded(line);
      if (!j.is_discarded() && j.value("step", int64_t{0}) <= resume_step) {
        kept += line + "\n";
      } else {
        ++dropped;
      }
    }
    if (in.bad()) throw FileError(path, "cannot read it back: " + std::string(std::strerror(errno)));
    if (dropped > 0) {
      if (resume_step < 0)
        spdlog::info("metrics.jsonl: dropping {} line(s) of an earlier attempt (a fresh start)", dropped);
      else
        spdlog::info("metrics.jsonl: dropping {} line(s) logged after step {} (the checkpoint resumed from)",
                     dropped, resume_step);
      detail::write_file_atomically(path, kept);
    }
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw FileError(path, "cannot open for appending: " + std::string(std::strerror(errno)));
  const off_t end = ::lseek(fd_, 0, SEEK_END);
  if (end < 0) {
    const std::string why = std::strerror(errno);
    ::close(fd_);
    throw FileError(path, "cannot find its end: " + why);
  }
  size_ = end;
}

MetricsLog::MetricsLog(MetricsLog&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), size_(other.size_), fragment_(other.fragment_),
      retry_(std::move(other.retry_)) {
  other.fd_ = -1;
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

int MetricsLog::try_append(const std::string& line) {
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {  // write() may write less than asked
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      // Cut off the part of the line that made it, so the next try does not glue onto it; when even
      // that fails, the next line starts with a newline and leaves the fragment a line of its own
      // (readers skip a line that does not parse).
      if (::ftruncate(fd_, size_) != 0) {
        fragment_ = true;
        if (const off_t end = ::lseek(fd_, 0, SEEK_END); end >= 0) size_ = end;  // never cut below it later
      }
      return err;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

void MetricsLog::append(const StepRecord& record) { append_line(to_json(record), record.step); }
void MetricsLog::append(const ScheduleChange& change) { append_line(to_json(change), change.step); }
void MetricsLog::append(const ActivationRecord& record) { append_line(to_json(record), record.step); }

void MetricsLog::append_line(const nlohmann::json& record, int64_t step) {
  const std::string line = (fragment_ ? "\n" : "") + record.dump() + "\n";
  auto wait = retry_.first_wait;
  for (int attempt = 1;; ++attempt) {
    const int err = try_append(line);
    if (err == 0) {
      size_ += static_cast<int64_t>(line.size());
      fragment_ = false;
      return;
    }
    if (attempt >= retry_.attempts)
      throw FileError(path_, fmt::format("cannot append the record of step {} ({} tries): {}. The {} bytes written "
                                         "before are intact, and so is the newest checkpoint; free the space (or fix "
                                         "the error) and run the same command to resume",
                                         step, attempt, std::strerror(err), size_));
    spdlog::warn("{}: cannot append ({}); trying again in {} ms", path_.string(), std::strerror(err), wait.count());
    retry_.wait(wait);
    wait *= 2;
  }
}

void MetricsLog::sync() {
  if (::fsync(fd_) != 0) throw FileError(path_, "fsync failed: " + std::string(std::strerror(errno)));
}

}  // namespace attnlab
