// Finding a sweep's runs and reading what they wrote. The manifest says which runs should exist, so
// a run that never started is still reported; without one, run directories are found by their
// config.yaml.
#include <algorithm>
#include <fstream>
#include <set>
#include <stdexcept>

#include <yaml-cpp/yaml.h>

#include "attnlab/report.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

// Means of consecutive points in bins of ceil(n / kTrainCurvePoints), each at its bin's last step.
std::vector<TrainPoint> binned(const std::vector<TrainPoint>& points) {
  const size_t bin = (points.size() + kTrainCurvePoints - 1) / kTrainCurvePoints;
  if (bin <= 1) return points;
  std::vector<TrainPoint> out;
  for (size_t start = 0; start < points.size(); start += bin) {
    const size_t end = std::min(points.size(), start + bin);
    double sum = 0.0;
    for (size_t i = start; i < end; ++i) sum += points[i].train_loss;
    out.push_back({points[end - 1].step, points[end - 1].tokens, sum / double(end - start)});
  }
  return out;
}

// The validation points and the (binned) training losses of a run's metrics.jsonl.
void read_curves(const fs::path& metrics, RunRecord& run) {
  std::vector<TrainPoint> train;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) continue;
    const int64_t step = j.value("step", int64_t{0}), tokens = j.value("tokens", int64_t{0});
    if (j.value("val_loss", nlohmann::json()).is_number()) run.curve.push_back({step, tokens, j["val_loss"].get<double>()});
    if (j.value("train_loss", nlohmann::json()).is_number()) train.push_back({step, tokens, j["train_loss"].get<double>()});
  }
  run.train_curve = binned(train);
}

// Tier, arm and seed of a run found without a manifest: final.json when there, else config.yaml.
void identify(RunRecord& r, const fs::path& dir) {
  if (r.state.final_json.is_object()) {
    r.tier = r.state.final_json.value("tier", std::string());
    r.arm = r.state.final_json.value("arm", std::string());
    r.seed = r.state.final_json.value("seed", uint64_t{0});
    return;
  }
  try {
    const YAML::Node cfg = YAML::LoadFile((dir / "config.yaml").string());
    if (cfg["tier"]) r.tier = cfg["tier"].as<std::string>();
    if (cfg["model"] && cfg["model"]["arm"]) r.arm = cfg["model"]["arm"].as<std::string>();
    if (cfg["seed"]) r.seed = cfg["seed"].as<uint64_t>();
  } catch (const YAML::Exception&) {
    r.state.detail += (r.state.detail.empty() ? "" : "; ") + std::string("config.yaml unreadable");
  }
}

std::vector<RunRecord> from_manifest(const fs::path& sweep_dir, const nlohmann::json& manifest) {
  std::vector<RunRecord> runs;
  for (const auto& entry : manifest.at("runs")) {
    RunRecord r;
    r.name = entry.at("name").get<std::string>();
    r.tier = entry.value("tier", std::string());
    r.arm = entry.value("arm", std::string());
    r.seed = entry.value("seed", uint64_t{0});
    r.variant = entry.value("variant", std::string());
    r.state = inspect_run(sweep_dir / r.name, entry.value("config_hash", std::string()));
    runs.push_back(std::move(r));
  }
  return runs;
}

// The sweep layout <tier>/<arm>/<variant...>/s<seed> gives the variant back; other layouts have none.
std::string variant_of(const RunRecord& r) {
  std::vector<std::string> parts;
  for (const auto& p : fs::path(r.name)) parts.push_back(p.string());
  if (parts.size() < 3 || parts[0] != r.tier || parts[1] != r.arm || parts.back() != "s" + std::to_string(r.seed))
    return "";
  std::string variant;
  for (size_t i = 2; i + 1 < parts.size(); ++i) variant += (variant.empty() ? "" : "/") + parts[i];
  return variant;
}

// Two runs claiming the same (tier, variant, arm, seed) cannot both be paired; the later one
// becomes a group of its own (named after its directory) rather than silently replacing the first.
void separate_duplicates(std::vector<RunRecord>& runs) {
  std::set<std::string> seen;
  for (auto& r : runs) {
    const auto key = r.tier + "|" + r.variant + "|" + r.arm + "|" + std::to_string(r.seed);
    if (!seen.insert(key).second) r.variant = r.name;
  }
}

std::vector<RunRecord> from_scan(const fs::path& sweep_dir) {
  std::vector<fs::path> dirs;
  for (auto it = fs::recursive_directory_iterator(sweep_dir); it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_directory() && it->path().filename() == "checkpoints") it.disable_recursion_pending();
    if (it->is_regular_file() && it->path().filename() == "config.yaml") dirs.push_back(it->path().parent_path());
  }
  std::sort(dirs.begin(), dirs.end());
  std::vector<RunRecord> runs;
  for (const auto& dir : dirs) {
    RunRecord r;
    r.name = fs::relative(dir, sweep_dir).string();
    r.state = inspect_run(dir);
    identify(r, dir);
    r.variant = variant_of(r);
    runs.push_back(std::move(r));
  }
  separate_duplicates(runs);
  return runs;
}

}  // namespace

double RunRecord::final_val_loss() const { return state.final_json.at("final_val_loss").get<double>(); }
int64_t RunRecord::val_tokens() const { return state.final_json.value("val_tokens", int64_t{-1}); }
// Compared as text: the trainer writes a number, hand-made files may write a string.
std::string RunRecord::val_fingerprint() const {
  const auto it = state.final_json.find("val_fingerprint");
  if (it == state.final_json.end()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

std::vector<RunRecord> collect_runs(const fs::path& sweep_dir) {
  if (!fs::is_directory(sweep_dir)) throw std::runtime_error(sweep_dir.string() + ": no such sweep directory");
  const fs::path manifest_path = sweep_dir / "manifest.json";
  std::vector<RunRecord> runs;
  if (fs::exists(manifest_path)) {
    std::ifstream in(manifest_path);
    const auto manifest = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (manifest.is_discarded() || !manifest.contains("runs"))
      throw std::runtime_error(manifest_path.string() + ": not a sweep manifest (unparsable, or no \"runs\")");
    runs = from_manifest(sweep_dir, manifest);
  } else {
    runs = from_scan(sweep_dir);
  }
  if (runs.empty()) throw std::runtime_error(sweep_dir.string() + ": no runs (no manifest.json, no run directory with a config.yaml)");
  for (auto& r : runs) read_curves(sweep_dir / r.name / "metrics.jsonl", r);
  return runs;
}

}  // namespace attnlab
