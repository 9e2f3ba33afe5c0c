// The run directory: who owns it, and its metrics log (issue 3).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "attnlab/run_config.h"

namespace attnlab::run_dir {

/// Keys a resumed run may change: the step budget only.
bool is_budget_key(const std::string& key);

/// Makes `dir` this run's: creates it and writes config.yaml, or checks that the config.yaml there
/// differs from `cfg` only in the budget (rewriting it then). Throws TrainError naming the directory
/// and the differing keys when it belongs to another run, or when it holds files but no config.yaml.
/// `must_be_new`: refuse an existing attnlab run too (branch runs).
void claim(const std::filesystem::path& dir, const RunConfig& cfg, bool must_be_new);

/// Writes `text` to `path` atomically (temporary sibling, fsync, rename).
void write_atomically(const std::filesystem::path& path, const std::string& text);

/// Append-only metrics.jsonl. Opening it for a run resumed at `resume_step` first drops the lines of
/// later steps (logged after the checkpoint the run resumes from), so every step appears once.
/// resume_step = -1 (a fresh start) drops every line, the initial activation probe's included.
class MetricsLog {
 public:
  MetricsLog(const std::filesystem::path& path, int64_t resume_step);
  void append(const nlohmann::json& line);

 private:
  std::ofstream out_;
};

}  // namespace attnlab::run_dir
