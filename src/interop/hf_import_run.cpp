// A Hugging Face model directory, or a directory of its revisions, -> a run directory of weights-only
// checkpoints laid out as the trainer lays them out (import_hf).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "attnlab/hf_interop.h"
#include "attnlab/model_config_json.h"
#include "attnlab/run_config.h"
#include "checkpoint/file_ops.h"
#include "checkpoint/state_json.h"
#include "interop/hf_config.h"
#include "attnlab/run_dir.h"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// What data.train / data.val hold until --set names shards: a pattern no file matches, which every
// command that needs shards reports verbatim.
constexpr const char* kNoShards = "<none: import-hf --set data.val=GLOB, or pass --data/--val>";

struct Revision {
  int64_t step;
  fs::path dir;
};

// The step a revision directory's name ends in: step143000, step_000100, global_step5, 1000.
std::optional<int64_t> trailing_step(const std::string& name) {
  size_t begin = name.size();
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(name[begin - 1]))) --begin;
  if (begin == name.size() || name.size() - begin > 15) return std::nullopt;
  return std::stoll(name.substr(begin));
}

std::vector<Revision> list_revisions(const fs::path& source, int64_t single_step) {
  if (detail::is_file(source / "config.json")) return {{single_step, source}};
  if (!detail::is_dir(source)) throw CheckpointError(source, "is not a directory");
  if (detail::is_file(source / "config.yaml")) {
    throw CheckpointError(source, "is an attnlab run directory (config.yaml), not a Hugging Face model: eval, "
                                  "activations, probe and the others read it as it is");
  }
  std::map<int64_t, fs::path> by_step;
  for (const auto& name : detail::list_directory(source)) {
    const fs::path dir = source / name;
    if (name.empty() || name[0] == '.' || !detail::is_dir(dir)) continue;
    if (!detail::is_file(dir / "config.json")) {
      throw CheckpointError(dir, "has no config.json: " + source.string() + " has none either, so it was read as a "
                                 "directory of revisions (step<N>/ sub-directories, each a Hugging Face model), and "
                                 "this sub-directory is none");
    }
    const auto step = trailing_step(name);
    if (!step) throw CheckpointError(dir, "name does not end in the revision's step number (e.g. step1000)");
    if (!by_step.emplace(*step, dir).second) {
      throw CheckpointError(dir, "names step " + std::to_string(*step) + ", as " + by_step[*step].string() + " does");
    }
  }
  if (by_step.empty()) {
    throw CheckpointError(source, "is neither a model directory (config.json) nor a directory of revisions "
                                  "(sub-directories step<N>/ holding config.json)");
  }
  std::vector<Revision> out;
  for (const auto& [step, dir] : by_step) out.push_back({step, dir});
  return out;
}

// Every revision's config.json describes the first one's architecture (checked before any weight is read).
ModelConfig common_architecture(const std::vector<Revision>& revisions) {
  const auto first = interop::architecture_from_hf(interop::read_json_file(revisions[0].dir / "config.json"),
                                                   revisions[0].dir / "config.json");
  const json want = model_config_to_json(first.model);
  for (const auto& r : revisions) {
    const auto file = r.dir / "config.json";
    const json got = model_config_to_json(interop::architecture_from_hf(interop::read_json_file(file), file).model);
    if (got != want) {
      throw CheckpointError(file, "describes another architecture than " + (revisions[0].dir / "config.json").string() +
                                      ": " + got.dump() + " vs " + want.dump());
    }
  }
  return first.model;
}

// The run's config: the imported model and placeholders, then the user's --set assignments (through
// the same YAML path as `attnlab train --set`); model.* keys stay as config.json says.
RunConfig imported_run_config(const ModelConfig& model, const fs::path& run_dir, int64_t last_step,
                              const std::vector<std::string>& overrides) {
  RunConfig cfg;
  cfg.tier = "imported";
  cfg.seed = 0;
  cfg.out_dir = run_dir.string();
  cfg.model = model;
  cfg.data.train = cfg.data.val = kNoShards;
  cfg.train.seq_len = std::min<int64_t>(model.block_size, 1024);
  cfg.train.max_steps = std::max<int64_t>(last_step, 1);
  if (overrides.empty()) return cfg;
  const fs::path tmp = fs::temp_directory_path() / ("attnlab-import-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(tmp) << to_yaml(cfg);
  RunConfig out;
  try {
    out = load_run_config(tmp, overrides);
  } catch (...) {
    detail::remove_tree(tmp);
    throw;
  }
  detail::remove_tree(tmp);
  for (const auto& key : differing_keys(cfg, out)) {
    if (key.rfind("model.", 0) == 0) throw std::invalid_argument("--set " + key + ": the model comes from config.json");
  }
  return out;
}

void require_new_directory(const fs::path& run_dir) {
  if (detail::is_dir(run_dir) && !detail::list_directory(run_dir).empty()) {
    throw CheckpointError(run_dir, "exists and is not empty; import-hf writes a new run directory");
  }
  if (detail::is_file(run_dir)) throw CheckpointError(run_dir, "is a file; import-hf writes a new run directory");
}

}  // namespace

HfImportResult import_hf(const fs::path& source, const fs::path& run_dir, const HfImportOptions& options) {
  if (options.step < 0) throw std::invalid_argument("import step must be >= 0, got " + std::to_string(options.step));
  const auto revisions = list_revisions(source, options.step);
  HfImportResult result;
  result.model = common_architecture(revisions);
  const RunConfig cfg = imported_run_config(result.model, run_dir, revisions.back().step, options.overrides);
  try {
    validate(cfg);  // what every later reader of config.yaml checks: a run that could not be read is not written
  } catch (const ConfigError& e) {  // the model's sizes, or the step (train.max_steps) times tokens per step
    throw CheckpointError(revisions.back().dir / "config.json",
                          fmt::format("and step {} make a run config that does not validate, so nothing is written: {}",
                                      revisions.back().step, e.what()));
  }
  require_new_directory(run_dir);
  // Held until every checkpoint is written, so no trainer or second import writes the directory meanwhile.
  const RunWriter writer = RunDir(run_dir).claim(cfg, /*must_be_new=*/true);
  try {
    for (const auto& r : revisions) {
      HfModel hf = read_hf_model(r.dir);
      result.model_type = hf.model_type;
      TrainState state;
      state.step = r.step;
      state.data_position = r.step;
      state.config = cfg;
      state.trainer.imported_from = ImportRecord{fs::absolute(r.dir).string(), hf.model_type, hf.hf_config};
      writer.save_weights_checkpoint(*hf.model, state);
      spdlog::info("imported {} as step {}", r.dir.string(), r.step);
      result.steps.push_back(r.step);
      if (options.after_save) options.after_save(r.step);
    }
  } catch (...) {
    detail::remove_tree(run_dir);  // it was new (or empty): nothing of anyone else's is lost
    throw;
  }
  return result;
}

}  // namespace attnlab
