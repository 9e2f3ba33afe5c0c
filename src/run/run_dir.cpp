#include "attnlab/run_dir.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "common/durable_file.h"
#include "common/file_lock.h"
#include "common/input_file.h"
#include "common/json_read.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

bool may_change_on_resume(const std::string& key) {
  return key == "train.max_steps" || key == "train.token_budget" || key == "out_dir" || is_observation_key(key);
}

// Files only a trainer (or an analysis of its run) puts into a run directory.
bool is_run_file(const std::string& name) {
  return name == "checkpoints" || name == "metrics.jsonl" || name == "final.json" || name == "probes";
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 4; ++i) out += (i ? ", " : "") + names[i];
  return names.size() > 4 ? out + fmt::format(" and {} more", names.size() - 4) : out;
}

// A run in the words of its config: where it was trained and what distinguishes it in a sweep.
std::string run_summary(const RunConfig& cfg) {
  return fmt::format("arm {}, seed {}, tier {}, out_dir {}", cfg.model.arm, cfg.seed, cfg.tier, cfg.out_dir);
}

constexpr const char* kConfigRemedy =
    "restore it (each checkpoint's state.json keeps the run's config under \"config\", which YAML reads as it "
    "stands), or move the directory away to train the run afresh";

}  // namespace

std::vector<std::string> resume_incompatible_keys(const RunConfig& stored, const RunConfig& wanted) {
  std::vector<std::string> keys;
  for (const auto& key : differing_keys(stored, wanted))
    if (!may_change_on_resume(key)) keys.push_back(key);
  return keys;
}

RunDir::RunDir(fs::path dir) : dir_(std::move(dir)) {}

bool RunDir::is_run(const fs::path& path) {
  const RunDir run(path);
  std::error_code ec;
  return fs::exists(run.config_file(), ec) || fs::is_directory(run.checkpoints_path(), ec);
}

std::optional<RunDir> RunDir::containing(const fs::path& path) {
  if (is_run(path)) return RunDir(path);
  for (fs::path p = path; p.has_parent_path() && p != p.parent_path(); p = p.parent_path())
    if (p.filename() == "checkpoints") return RunDir(p.parent_path());
  return std::nullopt;
}

bool RunDir::claimed() const { return fs::exists(config_file()); }

std::string RunDir::unclaimable_reason() const {
  std::error_code ec;
  if (!fs::exists(dir_, ec)) return "";
  if (!fs::is_directory(dir_, ec)) return "is not a directory; choose another out_dir";
  std::vector<std::string> run_files, others;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == lock_file().filename() || name == ".config.yaml.tmp") continue;  // a claim cut short left them
    (is_run_file(name) ? run_files : others).push_back(name + (entry.is_directory() ? "/" : ""));
  }
  if (ec) return "cannot be listed: " + ec.message();
  std::sort(run_files.begin(), run_files.end());
  std::sort(others.begin(), others.end());
  if (!run_files.empty())
    return "holds " + joined(run_files) +
           " but no config.yaml: a damaged run directory (its config.yaml was deleted or lost); " + kConfigRemedy;
  if (!others.empty())
    return "holds " + joined(others) +
           " and no config.yaml: not an attnlab run directory, refusing to write into it; choose another out_dir";
  return "";
}

RunConfig RunDir::config() const {
  if (!claimed()) throw FileError(config_file(), "missing: the directory was never claimed by `attnlab train`");
  try {
    return load_run_config(config_file());
  } catch (const std::exception& e) {  // ConfigError, or YAML's own for a file cut short
    throw FileError(config_file(), std::string(e.what()) + "; " + kConfigRemedy);
  }
}

std::optional<FinalRecord> RunDir::final_record() const {
  const fs::path file = final_file();
  if (!fs::exists(file)) return std::nullopt;
  try {
    // A FIFO or a directory is refused by what it is; deep nesting and numbers beyond a double too.
    const std::string text = detail::read_regular_file(file, detail::kJsonMaxBytes);
    nlohmann::json j;
    try {
      j = detail::parse_json(text);
    } catch (const detail::JsonError& e) {
      throw FileError(file, std::string("is not valid JSON (cut short?): ") + e.what());
    }
    return final_record_from_json(j, file);
  } catch (const FileError& e) {
    std::string remedy = "delete final.json and run the same `attnlab train` (or sweep) again: ";
    try {
      const auto ckpts = checkpoints();
      remedy += ckpts.empty() ? "no checkpoint is left, so the run trains again from step 0"
                              : fmt::format("it resumes from the newest checkpoint (step {}) and rewrites final.json",
                                            ckpts.back().step);
    } catch (const std::exception&) {
      remedy += "it resumes from the newest checkpoint that loads";
    }
    throw FileError(file, e.problem() + "; " + remedy);
  }
}

std::optional<RunHolder> RunDir::holder() const {
  const auto held = detail::lock_holder(lock_file());
  if (!held) return std::nullopt;
  return RunHolder{held->pid, held->host};
}

std::vector<CheckpointInfo> RunDir::checkpoints() const { return list_checkpoints(checkpoints_path()); }

void RunDir::check_own_checkpoint(const fs::path& checkpoint, const std::optional<RunConfig>& recorded) const {
  if (!claimed()) return;  // import-hf's and tests' runs may have none: nothing to compare with
  RunConfig own;
  try {
    own = config();
  } catch (const FileError& e) {
    spdlog::warn("cannot check that {} is this run's checkpoint: {}", checkpoint.string(), e.what());
    return;
  }
  const std::string remedy = fmt::format(
      "a checkpoint copied in from another run is never read as this one's: move it out of {}", checkpoints_path().string());
  if (!recorded)
    throw CheckpointError(checkpoint, fmt::format("records no run config, so it is not a checkpoint of {} ({}); {}",
                                                  dir_.string(), run_summary(own), remedy));
  const auto differing = resume_incompatible_keys(own, *recorded);
  if (differing.empty()) return;
  throw CheckpointError(checkpoint,
                        fmt::format("is another run's checkpoint: its state.json records the run ({}), while {} is "
                                    "the run ({}) by its config.yaml; they differ in {}; {}",
                                    run_summary(*recorded), dir_.string(), run_summary(own), joined(differing), remedy));
}

std::optional<LoadedCheckpoint> RunDir::latest_checkpoint(std::vector<std::string>* warnings, bool with_optimizer,
                                                          const CheckpointCheck& check) const {
  // Checked before the caller's check (another arm's checkpoint would fail check_restorable) and
  // thrown past load_latest's fallback: another run's checkpoint is refused, never skipped for an older one.
  struct NotThisRuns {
    CheckpointError error;
  };
  const CheckpointCheck own_first = [&](const LoadedCheckpoint& c) {
    try {
      check_own_checkpoint(c.dir, c.state.config);
    } catch (const CheckpointError& e) {
      throw NotThisRuns{e};
    }
    if (check) check(c);
  };
  try {
    return load_latest(checkpoints_path(), warnings, with_optimizer, own_first);
  } catch (const NotThisRuns& foreign) {
    throw foreign.error;
  }
}

LoadedModel RunDir::latest_model(std::vector<std::string>* warnings) const {
  std::optional<LoadedModel> out;  // built inside the check, so a checkpoint whose weights do not fit is skipped
  latest_checkpoint(warnings, /*with_optimizer=*/false, [&](const LoadedCheckpoint& c) { out = load_model(c); });
  if (!out) throw CheckpointError(dir_, "run directory has no checkpoint");
  return std::move(*out);
}

LoadedCheckpoint load_run_checkpoint(const fs::path& dir, bool with_optimizer) {
  auto ckpt = load_checkpoint(dir, with_optimizer);
  if (const auto run = RunDir::containing(fs::absolute(dir))) run->check_own_checkpoint(dir, ckpt.state.config);
  return ckpt;
}

MetricsHistory RunDir::metrics() const {
  return fs::exists(metrics_file()) ? read_metrics(metrics_file()) : MetricsHistory{};
}

RunWriter RunDir::claim(const RunConfig& cfg, bool must_be_new) const {
  // Refused before the lock file is made, so a foreign directory gets nothing written into it.
  if (!claimed())
    if (const auto why = unclaimable_reason(); !why.empty()) throw FileError(dir_, why);
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw FileError(dir_, "cannot create the run directory: " + ec.message());
  auto lock = detail::FileLock::try_acquire(lock_file());
  if (!lock) {
    const auto held = holder();
    throw FileError(dir_, fmt::format("is held by {}: another `attnlab train` (perhaps a sweep's worker) is training "
                                      "this run; wait for it to end, or stop it, before running it here",
                                      held ? to_string(*held) : std::string("a process that has just let go (try again)")));
  }
  // From here on no other attnlab process changes the directory.
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
  } else if (const auto why = unclaimable_reason(); !why.empty()) {
    throw FileError(dir_, why);
  }
  detail::write_file_atomically(config_file(), to_yaml(cfg));
  return RunWriter(*this, std::move(*lock));
}

RunWriter::RunWriter(RunDir dir, detail::FileLock lock)
    : dir_(std::move(dir)), lock_(std::make_unique<detail::FileLock>(std::move(lock))) {}
RunWriter::RunWriter(RunWriter&&) noexcept = default;
RunWriter& RunWriter::operator=(RunWriter&&) noexcept = default;
RunWriter::~RunWriter() = default;

void RunWriter::write_final(const FinalRecord& record) const {
  detail::write_file_atomically(dir_.final_file(), to_json(record).dump(2) + "\n");
}

MetricsLog RunWriter::open_metrics(int64_t resume_step) const { return MetricsLog(dir_.metrics_file(), resume_step); }

fs::path RunWriter::save_checkpoint(const GPTImpl& model, const torch::optim::Optimizer& opt, const TrainState& state,
                                    const RetentionPolicy& policy) const {
  return attnlab::save_checkpoint(dir_.checkpoints_path(), model, opt, state, policy);
}

fs::path RunWriter::save_weights_checkpoint(const GPTImpl& model, const TrainState& state) const {
  return attnlab::save_weights_checkpoint(dir_.checkpoints_path(), model, state);
}

std::vector<fs::path> find_run_dirs(const fs::path& root) {
  if (RunDir(root).claimed()) return {root};
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
