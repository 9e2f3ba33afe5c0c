#include "attnlab/run_metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
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

// Each reader below throws std::invalid_argument saying what is wrong with the record (the key and
// its value where json_field names them); read_metrics() adds the file and line.

TrackedActivations tracked_from_json(const nlohmann::json& j) {
  try {
    TrackedActivations t;
    t.step = json_field<int64_t>(j, "step", "");
    for (const auto& layer : json_field<nlohmann::json>(j, "layers", "")) {
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
    throw std::invalid_argument(std::string("an activation record is incomplete: ") + e.what());
  }
}

ScheduleChange schedule_change_from_json(const nlohmann::json& j) {
  try {
    const std::string w;
    return {json_field<int64_t>(j, "step", w), json_field<int64_t>(j, "total_steps_before", w),
            json_field<int64_t>(j, "total_steps", w), json_field<double>(j, "next_lr_before", w),
            json_field<double>(j, "next_lr", w)};
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("a schedule_change record ") + e.what());
  }
}

// j[key] as a T, none where it is absent or null (older builds wrote fewer keys).
template <class T>
std::optional<T> present_field(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return json_field<T>(j, key, "");
}

// A step record's points: "step" an integer, "tokens" one where present, the losses numbers or null.
void take_step_record(const nlohmann::json& j, MetricsHistory& h) {
  const auto step = json_field<int64_t>(j, "step", "");
  const auto tokens = present_field<int64_t>(j, "tokens").value_or(0);
  const auto val_loss = present_field<double>(j, "val_loss"), train_loss = present_field<double>(j, "train_loss");
  // "tasks" first: a malformed one skips the whole line, not half of it
  if (j.contains("tasks")) h.tasks.push_back({step, tokens, task_accuracies_from_json(j.at("tasks"), "tasks")});
  if (val_loss) h.validation.push_back({step, tokens, *val_loss});
  if (train_loss) h.training.push_back({step, tokens, *train_loss});
}

// One line of metrics.jsonl into `h`; throws std::invalid_argument saying why it cannot be taken.
void take_line(const std::string& line, MetricsHistory& h) {
  nlohmann::json j;
  try {
    j = detail::parse_json(line);
  } catch (const detail::JsonError& e) {  // most often a write cut short by a crash
    throw std::invalid_argument(e.what());
  }
  if (!j.is_object()) throw std::invalid_argument("is not a JSON object");
  if (!j.contains("type")) return take_step_record(j, h);
  const std::string type = j["type"].is_string() ? j["type"].get<std::string>() : "";
  if (type == "activations") h.activations.push_back(tracked_from_json(j));
  if (type == "schedule_change") h.schedule_changes.push_back(schedule_change_from_json(j));
  // any other type: a record of a later build, no step record
}

// A domain's loss: null for NaN (a domain without targets; JSON has no NaN).
nlohmann::json finite_or_null(double x) { return std::isnan(x) ? nlohmann::json() : nlohmann::json(x); }

nlohmann::json optional_number(const std::optional<double>& x) { return x ? nlohmann::json(*x) : nlohmann::json(); }

// The step a line of metrics.jsonl records (0 when it names none); throws std::invalid_argument
// naming the key for a line that is not a JSON object or whose "step" is not an integer.
int64_t line_step(const std::string& line) {
  nlohmann::json j;
  try {
    j = detail::parse_json(line);
  } catch (const detail::JsonError& e) {
    throw std::invalid_argument(e.what());
  }
  if (!j.is_object()) throw std::invalid_argument("is not a JSON object");
  return present_field<int64_t>(j, "step").value_or(0);
}

// A resume's rewrite of metrics.jsonl without the lines of steps after `resume_step` (all of them
// for a fresh start, -1) and those that name no step it can read (a torn last line, a mistyped
// "step"), each of these with a warning naming its line: the run goes on, since its checkpoint, not
// its log, is the state it continues from.
void drop_lines_after(const fs::path& path, int64_t resume_step) {
  std::ifstream in(path);
  std::string line, kept;
  int64_t dropped = 0, number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    try {
      if (line_step(line) <= resume_step) {
        kept += line + "\n";
        continue;
      }
    } catch (const std::invalid_argument& e) {
      spdlog::warn("{}:{}: {}; dropped", path.string(), number, e.what());
    }
    ++dropped;
  }
  if (in.bad()) throw FileError(path, "cannot read it back: " + std::string(std::strerror(errno)));
  if (dropped == 0) return;
  if (resume_step < 0)
    spdlog::info("metrics.jsonl: dropping {} line(s) of an earlier attempt (a fresh start)", dropped);
  else
    spdlog::info("metrics.jsonl: dropping {} line(s) logged after step {} (the checkpoint resumed from)", dropped,
                 resume_step);
  detail::write_file_atomically(path, kept);
}

}  // namespace

nlohmann::json to_json(const StepRecord& r) {
  nlohmann::json j = {{"step", r.step},         {"tokens", r.tokens},       {"train_loss", r.train_loss},
                      {"val_loss", optional_number(r.val_loss)},          {"lr", r.lr},
                      {"grad_norm", r.grad_norm}, {"tokens_per_s", r.tokens_per_s}, {"elapsed_s", r.elapsed_s}};
  if (r.mfu) j["mfu"] = *r.mfu;
  if (!r.tasks.empty()) j["tasks"] = to_json(r.tasks);
  if (r.val_loss_trigger) j["val_loss_trigger"] = finite_or_null(*r.val_loss_trigger);
  if (r.val_loss_other) j["val_loss_other"] = finite_or_null(*r.val_loss_other);
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
  int64_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.empty()) continue;
    try {
      take_line(line, h);
    } catch (const std::invalid_argument& e) {
      h.skipped.push_back(fmt::format("{}:{}: {}; line skipped", metrics_jsonl.string(), number, e.what()));
      spdlog::warn("{}", h.skipped.back());
    }
  }
  std::stable_sort(h.activations.begin(), h.activations.end(),
                   [](const TrackedActivations& a, const TrackedActivations& b) { return a.step < b.step; });
  return h;
}

MetricsLog::MetricsLog(const fs::path& path, int64_t resume_step, AppendRetry retry)
    : path_(path), retry_(std::move(retry)) {
  if (!retry_.wait) retry_.wait = [](std::chrono::milliseconds ms) { std::this_thread::sleep_for(ms); };
  retry_.attempts = std::max(retry_.attempts, 1);
  if (detail::regular_file_exists(path)) drop_lines_after(path, resume_step);
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
