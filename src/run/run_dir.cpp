#include "attnlab/run_dir.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "common/durable_file.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

bool may_change_on_resume(const std::string& key) {
  return key == "train.max_steps" || key == "train.token_budget" || key == "out_dir" || is_observation_key(key);
}

}  // namespace

std::vector<std::string> resume_incompatible_keys(const RunConfig& stored, const RunConfig& wanted) {
  std::vector<std::string> keys;
  for (const auto& key : differing_keys(stored, wanted))
    if (!may_change_on_resume(key)) keys.push_back(key);
  return keys;
}

RunDir::RunDir(fs::path dir) : dir_(std::move(dir)) {}

std::optional<RunDir> RunDir::containing(const fs::path& path) {
  if (fs::exists(path / "config.yaml") || fs::is_directory(checkpoints_dir(path))) return RunDir(path);
  for (fs::path p = path; p.has_parent_path() && p != p.parent_path(); p = p.parent_path())
    if (p.filename() == "checkpoints") return RunDir(p.parent_path());
  return std::nullopt;
}

bool RunDir::claimed() const { return fs::exists(config_file()); }

RunConfig RunDir::config() const {
  if (!claimed()) throw FileError(config_file(), "missing: the directory was never claimed by `attnlab train`");
  try {
    return load_run_config(config_file());
  } catch (const ConfigError& e) {
    throw FileError(config_file(), e.what());
  }
}

std::optional<FinalRecord> RunDir::final_record() const {
  const fs::path file = final_file();
  if (!fs::exists(file)) return std::nullopt;
  std::ifstream in(file);
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw FileError(file, "is not valid JSON");
  return final_record_from_json(j, file);
}

std::vector<CheckpointInfo> RunDir::checkpoints() const { return list_checkpoints(dir_); }

MetricsHistory RunDir::metrics() const {
  return fs::exists(metrics_file()) ? read_metrics(metrics_file()) : MetricsHistory{};
}

RunWriter RunDir::claim(const RunConfig& cfg, bool must_be_new) const {
  if (claimed()) {
    if (must_be_new) throw FileError(dir_, "already holds a run; a branch needs a new out_dir");
    const auto differing = resume_incompatible_keys(config(), cfg);
    if (!differing.empty()) {
      std::ostringstream msg;
      msg << "belongs to another run (its config.yaml differs in:";
      for (const auto& key : differing) msg << ' ' << key;
      msg << "); use another out_dir, or the same config to resume";
      throw FileError(dir_, msg.str());
    }
  } else if (fs::exists(dir_) && !fs::is_empty(dir_)) {
    throw FileError(dir_, "exists, holds files and no config.yaml; not an attnlab run directory, refusing to write "
                          "into it");
  }
  fs::create_directories(dir_);
  detail::write_file_atomically(config_file(), to_yaml(cfg));
  return RunWriter(*this);
}

void RunWriter::write_final(const FinalRecord& record) const {
  detail::write_file_atomically(dir_.final_file(), to_json(record).dump(2) + "\n");
}

MetricsLog RunWriter::open_metrics(int64_t resume_step) const { return MetricsLog(dir_.metrics_file(), resume_step); }

std::vector<fs::path> find_run_dirs(const fs::path& root) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_directory() && it->path().filename() == "checkpoints") it.disable_recursion_pending();
    if (it->is_directory() && RunDir(it->path()).claimed()) dirs.push_back(it->path());
  }
  if (ec) throw FileError(root, "cannot list: " + ec.message());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

void write_outputs(const fs::path& dir, const std::map<std::string, std::string>& files) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw FileError(dir, "cannot create the output directory: " + ec.message());
  for (const auto& [name, text] : files) {
    detail::write_file_atomically(dir / name, text);
    spdlog::debug("wrote {}", (dir / name).string());
  }
}

}  // namespace attnlab
