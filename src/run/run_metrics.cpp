#include "attnlab/run_metrics.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "attnlab/file_error.h"
#include "common/durable_file.h"

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

}  // namespace

MetricsHistory read_metrics(const fs::path& metrics_jsonl) {
  std::ifstream in(metrics_jsonl);
  if (!in) throw FileError(metrics_jsonl, "cannot read");
  MetricsHistory h;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) continue;
    if (j.value("type", "") == "activations") {
      h.activations.push_back(tracked_from_json(j, metrics_jsonl));
      continue;
    }
    const int64_t step = j.value("step", int64_t{0}), tokens = j.value("tokens", int64_t{0});
    if (j.value("val_loss", nlohmann::json()).is_number()) h.validation.push_back({step, tokens, j["val_loss"].get<double>()});
    if (j.value("train_loss", nlohmann::json()).is_number()) h.training.push_back({step, tokens, j["train_loss"].get<double>()});
  }
  std::stable_sort(h.activations.begin(), h.activations.end(),
                   [](const TrackedActivations& a, const TrackedActivations& b) { return a.step < b.step; });
  return h;
}

MetricsLog::MetricsLog(const fs::path& path, int64_t resume_step) : path_(path) {
  if (fs::exists(path)) {
    std::ifstream in(path);
    std::string line, kept;
    int64_t dropped = 0;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!j.is_discarded() && j.value("step", int64_t{0}) <= resume_step) {
        kept += line + "\n";
      } else {
        ++dropped;
      }
    }
    if (dropped > 0) {
      if (resume_step < 0)
        spdlog::info("metrics.jsonl: dropping {} line(s) of an earlier attempt (a fresh start)", dropped);
      else
        spdlog::info("metrics.jsonl: dropping {} line(s) logged after step {} (the checkpoint resumed from)",
                     dropped, resume_step);
      detail::write_file_atomically(path, kept);
    }
  }
  out_.open(path, std::ios::app);
  if (!out_) throw FileError(path, "cannot open for appending");
}

void MetricsLog::append(const nlohmann::json& record) {
  out_ << record.dump() << '\n';
  out_.flush();
  if (!out_) throw FileError(path_, "cannot append a record");
}

}  // namespace attnlab
