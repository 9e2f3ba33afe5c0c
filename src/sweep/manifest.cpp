// <out>/manifest.json: every run of the sweep with what it runs and where it stands, so `attnlab
// report` can name runs that never produced a final.json.
#include <chrono>
#include <ctime>

#include <nlohmann/json.hpp>

#include "attnlab/file_error.h"
#include "attnlab/sweep.h"
#include "common/durable_file.h"
#include "common/input_file.h"
#include "common/json_read.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

nlohmann::json run_json(const SweepRun& run, const RunState& state, const fs::path& executable) {
  nlohmann::json point = nlohmann::json::object();
  for (const auto& [key, value] : run.point) point[key] = value;
  std::vector<std::string> command = {executable.string()};
  for (const auto& arg : train_arguments(run)) command.push_back(arg);
  nlohmann::json j = {{"name", run.name},
                      {"out_dir", run.out_dir.string()},
                      {"tier", run.resolved.tier},
                      {"arm", run.resolved.model.arm},
                      {"seed", run.resolved.seed},
                      {"variant", run.variant},
                      {"grid", point},
                      {"config", run.config.string()},
                      {"overrides", run.overrides},
                      {"command", command},
                      {"config_hash", run.config_hash},
                      {"total_steps", run.resolved.total_steps()},
                      {"status", to_string(state.status)},
                      {"step", state.step}};
  if (state.status == RunStatus::finished) j["final_val_loss"] = state.final_record->final_val_loss;
  if (!state.detail.empty()) j["detail"] = state.detail;
  if (state.held_by) j["held_by"] = {{"pid", state.held_by->pid}, {"host", state.held_by->host}};
  return j;
}

}  // namespace

nlohmann::json manifest_json(const SweepSpec& spec, const std::vector<SweepRun>& runs,
                             const std::vector<RunState>& states, const fs::path& executable) {
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < runs.size(); ++i) list.push_back(run_json(runs[i], states[i], executable));
  return {{"format", "attnlab-sweep-manifest"},
          {"version", 1},
          {"sweep", spec.name},
          {"sweep_file", fs::absolute(spec.file).lexically_normal().string()},
          {"base", spec.base.string()},
          {"out", spec.out.string()},
          {"working_directory", fs::current_path().string()},
          {"updated", utc_now()},
          {"runs", list}};
}

std::optional<std::vector<ManifestEntry>> read_manifest(const fs::path& sweep_out) {
  const fs::path path = sweep_out / "manifest.json";
  nlohmann::json manifest;
  try {
    if (!detail::regular_file_exists(path)) return std::nullopt;
    manifest = detail::read_json_file(path);
  } catch (const FileError& e) {
    throw SweepError(std::string(e.what()) + " (not a sweep manifest)");
  }
  if (!manifest.is_object() || !manifest.contains("runs"))
    throw SweepError(path.string() + ": not a sweep manifest (no \"runs\")");
  std::vector<ManifestEntry> entries;
  for (const auto& e : manifest["runs"]) {
    try {
      entries.push_back({e.at("name").get<std::string>(), e.at("tier").get<std::string>(), e.at("arm").get<std::string>(),
                         e.at("variant").get<std::string>(), e.at("config_hash").get<std::string>(),
                         e.at("seed").get<uint64_t>()});
    } catch (const nlohmann::json::exception& ex) {
      throw SweepError(path.string() + ": a run entry is incomplete (" + ex.what() + ")");
    }
  }
  return entries;
}

void write_manifest(const SweepSpec& spec, const nlohmann::json& manifest) {
  fs::create_directories(spec.out);
  detail::write_file_atomically(spec.out / "manifest.json", manifest.dump(2) + "\n");
}

}  // namespace attnlab
