// Finding a sweep's runs and reading what they wrote (through RunDir). The manifest says which runs
// should exist, so a run that never started is still reported; without one, run directories are
// found by their config.yaml.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <stdexcept>

#include "attnlab/report.h"
#include "attnlab/run_dir.h"
#include "attnlab/sweep.h"

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

// Tier, arm and seed of a run found without a manifest: its final record when there, else its config.
void identify(RunRecord& r, const fs::path& dir) {
  if (const auto& f = r.state.final_record) {
    r.tier = f->tier, r.arm = f->arm, r.seed = f->seed;
    return;
  }
  try {
    const auto cfg = RunDir(dir).config();
    r.tier = cfg.tier, r.arm = cfg.model.arm, r.seed = cfg.seed;
  } catch (const FileError& e) {
    r.state.detail += (r.state.detail.empty() ? "" : "; ") + std::string("config.yaml unreadable: ") + e.problem();
  }
}

// The run's config hash, and for a windowed run its full-attention twin's (docs/windows.md): the
// same config without the window keys. An unreadable config.yaml leaves both empty (the run is
// then reported as it is without a window).
void read_window(RunRecord& r, const fs::path& dir) {
  try {
    auto cfg = RunDir(dir).config();
    r.config_hash = config_hash(cfg);
    if (!cfg.model.has_local_layer()) return;
    cfg.model.window.reset(), cfg.model.window_pattern.reset(), cfg.model.window_keep_first.reset();
    r.full_attention_hash = config_hash(cfg);
  } catch (const FileError&) {  // identify() or inspect_run() already says what is wrong with it
  }
}

std::vector<RunRecord> from_manifest(const fs::path& sweep_dir, const std::vector<ManifestEntry>& manifest) {
  std::vector<RunRecord> runs;
  for (const auto& entry : manifest) {
    RunRecord r;
    r.name = entry.name, r.tier = entry.tier, r.arm = entry.arm, r.seed = entry.seed, r.variant = entry.variant;
    r.state = inspect_run(sweep_dir / r.name, entry.config_hash);
    runs.push_back(std::move(r));
  }
  return runs;
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
  std::vector<RunRecord> runs;
  for (const auto& dir : find_run_dirs(sweep_dir)) {
    RunRecord r;
    r.name = fs::relative(dir, sweep_dir).string();
    r.state = inspect_run(dir);
    identify(r, dir);
    r.variant = variant_of_run_name(r.name, r.tier, r.arm, r.seed);  // the sweep's naming, read back
    runs.push_back(std::move(r));
  }
  separate_duplicates(runs);
  return runs;
}

}  // namespace

double RunRecord::final_val_loss() const { return state.final_record.value().final_val_loss; }
int64_t RunRecord::val_tokens() const { return state.final_record.value().val_tokens; }
uint64_t RunRecord::val_fingerprint() const { return state.final_record.value().val_fingerprint; }
const TaskAccuracies& RunRecord::final_tasks() const { return state.final_record.value().tasks; }
std::optional<double> RunRecord::final_domain_loss(bool trigger) const {
  const auto& f = state.final_record.value();
  const auto& value = trigger ? f.val_loss_trigger : f.val_loss_other;
  if (!value || std::isnan(*value)) return std::nullopt;  // NaN: the domain had no target
  return value;
}

std::vector<RunRecord> collect_runs(const fs::path& sweep_dir) {
  if (!fs::is_directory(sweep_dir)) throw std::runtime_error(sweep_dir.string() + ": no such sweep directory");
  const auto manifest = read_manifest(sweep_dir);
  std::vector<RunRecord> runs = manifest ? from_manifest(sweep_dir, *manifest) : from_scan(sweep_dir);
  if (runs.empty()) throw std::runtime_error(sweep_dir.string() + ": no runs (no manifest.json, no run directory with a config.yaml)");
  for (auto& r : runs) {
    read_window(r, sweep_dir / r.name);
    try {
      auto history = RunDir(sweep_dir / r.name).metrics();
      r.curve = std::move(history.validation);
      r.train_curve = binned(history.training);
    } catch (const FileError& e) {  // an unreadable log costs the run its curve, not the report
      r.state.detail += (r.state.detail.empty() ? "" : "; ") + std::string("metrics.jsonl: ") + e.problem();
    }
  }
  return runs;
}

}  // namespace attnlab
