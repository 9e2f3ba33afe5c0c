// Saving (atomic), loading (verified, with fallback) and restoring (bit-exact) checkpoints.
#include "attnlab/checkpoint.h"

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "attnlab/version.h"
#include "checkpoint/adamw_state.h"
#include "common/durable_file.h"
#include "checkpoint/file_ops.h"
#include "checkpoint/sha256.h"
#include "checkpoint/state_json.h"

namespace attnlab {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using detail::kModelFile;
using detail::kOptimizerFile;
using detail::kStateFile;

// Metadata keys of the tensor files, so a model.safetensors copied anywhere still describes itself.
constexpr const char* kMetaModel = "attnlab.model";
constexpr const char* kMetaConfig = "attnlab.config";
constexpr const char* kMetaStep = "attnlab.step";
constexpr const char* kMetaGroups = "attnlab.param_groups";

// ---- saving -----------------------------------------------------------------------------------

/// Leftovers of a crashed save or deletion: hidden siblings that are never a checkpoint.
void remove_hidden_leftovers(const fs::path& root) {
  for (const auto& name : detail::list_directory(root)) {
    if (name.rfind(".tmp.", 0) == 0 || name.rfind(".old.", 0) == 0) detail::remove_tree(root / name);
  }
}

fs::path make_checkpoints_root(const fs::path& run_dir) {
  const fs::path root = checkpoints_dir(run_dir);
  if (detail::make_directories(root)) {
    detail::fsync_directory(run_dir);  // the new directory's entry must itself be durable
  }
  return root;
}

json file_record(const fs::path& file) {
  const auto bytes = detail::file_bytes(file);
  if (!bytes) throw CheckpointError(file, "vanished after it was written");
  return {{"sha256", detail::sha256_file(file)}, {"bytes", *bytes}};
}

/// Writes the checkpoint's files into `dir`; without `opt` (an imported model) no optimizer file.
void write_files(const fs::path& dir, const GPTImpl& model, const torch::optim::AdamW* opt,
                 const TrainState& state) {
  TensorMap weights;
  for (const auto& item : model.named_parameters()) weights[item.key()] = item.value();
  const std::string step = std::to_string(state.step);
  write_safetensors(dir / kModelFile, weights,
                    {{"format", "pt"},
                     {kMetaModel, detail::model_config_to_json(model.config()).dump()},
                     {kMetaConfig, state.config.dump()},
                     {kMetaStep, step}});
  if (opt != nullptr) {
    const auto adamw = detail::adamw_state(model, *opt, dir / kOptimizerFile);
    write_safetensors(dir / kOptimizerFile, adamw.tensors,
                      {{"format", "pt"}, {kMetaGroups, adamw.groups.dump()}, {kMetaStep, step}});
  }

  detail::StateFile s{state, model.config(), json::object()};
  s.state.git_revision = git_revision();
  s.state.rng = capture_rng_states();
  s.files[kModelFile] = file_record(dir / kModelFile);
  if (opt != nullptr) s.files[kOptimizerFile] = file_record(dir / kOptimizerFile);
  detail::write_file_durably(dir / kStateFile, detail::state_file_to_json(s).dump(2) + "\n");
}

/// Renames the finished `tmp` to `final_dir`, replacing an older checkpoint of the same step
/// (left, for instance, corrupt before a fallback resume).
void publish(const fs::path& tmp, const fs::path& final_dir) {
  const fs::path root = final_dir.parent_path();
  const fs::path old = root / (".old." + final_dir.filename().string());
  if (detail::is_dir(final_dir)) detail::rename_path(final_dir, old);
  detail::rename_path(tmp, final_dir);
  detail::fsync_directory(root);
  detail::remove_tree(old);
}

// ---- loading ----------------------------------------------------------------------------------

/// Reads `name` of checkpoint `dir` after checking its size and SHA-256 against state.json.
SafetensorsContents read_verified(const fs::path& dir, const char* name, const json& files) {
  const fs::path file = dir / name;
  if (!files.contains(name) || !files[name].is_object() || !files[name].contains("sha256") ||
      !files[name].contains("bytes")) {
    throw CheckpointError(dir / kStateFile, std::string("lists no size and checksum for ") + name);
  }
  const json& record = files[name];
  const auto bytes = detail::file_bytes(file);
  if (!bytes) throw CheckpointError(file, std::string("cannot read: ") + std::strerror(errno));
  if (json(*bytes) != record["bytes"]) {
    throw CheckpointError(file, "is " + std::to_string(*bytes) + " bytes, state.json records " +
                                    record["bytes"].dump() + ": truncated or replaced");
  }
  if (json(detail::sha256_file(file)) != record["sha256"]) {
    throw CheckpointError(file, "SHA-256 differs from the one in state.json: the file is corrupt");
  }
  return read_safetensors(file);
}

json parse_groups(const SafetensorsMetadata& metadata, const fs::path& file) {
  const auto it = metadata.find(kMetaGroups);
  if (it == metadata.end()) throw CheckpointError(file, std::string("metadata lacks ") + kMetaGroups);
  try {
    json groups = json::parse(it->second);
    if (groups.is_array()) return groups;
  } catch (const json::parse_error&) {
  }
  throw CheckpointError(file, std::string("metadata ") + kMetaGroups + " is not a JSON list");
}

// ---- restoring --------------------------------------------------------------------------------

void check_same_model(const LoadedCheckpoint& ckpt, const GPTImpl& model) {
  const json saved = detail::model_config_to_json(ckpt.model_config);
  const json here = detail::model_config_to_json(model.config());
  std::string differences;
  for (const auto& [key, value] : saved.items()) {
    if (here[key] != value) differences += " " + key + " (" + value.dump() + " vs " + here[key].dump() + ")";
  }
  if (!differences.empty()) {
    throw CheckpointError(ckpt.dir, "checkpoint's model differs from this model in:" + differences);
  }
}

/// Throws unless the weights hold exactly the model's parameter names with their shapes.
void check_weights(const LoadedCheckpoint& ckpt, const GPTImpl& model) {
  const fs::path file = ckpt.dir / kModelFile;
  size_t matched = 0;
  for (const auto& item : model.named_parameters()) {
    const auto it = ckpt.weights.find(item.key());
    if (it == ckpt.weights.end()) throw CheckpointError(file, "has no tensor '" + item.key() + "'");
    if (!it->second.sizes().equals(item.value().sizes())) {
      throw CheckpointError(file, "tensor '" + item.key() + "' has shape " + c10::str(it->second.sizes()) +
                                      ", the model's " + c10::str(item.value().sizes()));
    }
    ++matched;
  }
  if (matched != ckpt.weights.size()) {
    throw CheckpointError(file, std::to_string(ckpt.weights.size() - matched) + " tensors name no model parameter");
  }
}

LoadedModel model_from(const LoadedCheckpoint& ckpt, const fs::path& source) {
  LoadedModel out;
  out.model = GPT(ckpt.model_config);
  restore_model(ckpt, *out.model);
  out.model->eval();
  out.model_config = ckpt.model_config;
  out.config = ckpt.state.config;
  out.extra = ckpt.state.extra;
  out.step = ckpt.state.step;
  out.source = source;
  return out;
}

/// A lone model.safetensors: its metadata stands in for state.json.
LoadedModel model_from_file(const fs::path& file) {
  SafetensorsContents contents = read_safetensors(file);
  const auto& meta = contents.metadata;
  if (!meta.count(kMetaModel)) throw CheckpointError(file, std::string("metadata lacks ") + kMetaModel);
  LoadedCheckpoint ckpt;
  ckpt.dir = file.parent_path();
  try {
    ckpt.model_config = detail::model_config_from_json(json::parse(meta.at(kMetaModel)), file);
    if (meta.count(kMetaConfig)) ckpt.state.config = json::parse(meta.at(kMetaConfig));
    if (meta.count(kMetaStep)) ckpt.state.step = std::stoll(meta.at(kMetaStep));
  } catch (const std::exception& e) {  // json::parse_error, std::invalid_argument of stoll
    throw CheckpointError(file, std::string("bad attnlab metadata: ") + e.what());
  }
  ckpt.weights = std::move(contents.tensors);
  return model_from(ckpt, file);
}

}  // namespace

namespace {

fs::path save(const fs::path& run_dir, const GPTImpl& model, const torch::optim::AdamW* opt,
              const TrainState& state, const RetentionPolicy& policy) {
  if (policy.keep_last < 1) throw std::invalid_argument("checkpoint retention: keep_last must be at least 1");
  const fs::path root = make_checkpoints_root(run_dir);
  remove_hidden_leftovers(root);
  const fs::path final_dir = checkpoint_dir(run_dir, state.step);
  const fs::path tmp = root / (".tmp." + final_dir.filename().string());
  detail::make_directories(tmp);
  try {
    write_files(tmp, model, opt, state);
    detail::fsync_directory(tmp);
  } catch (...) {
    detail::remove_tree(tmp);  // nothing half-written stays behind
    throw;
  }
  publish(tmp, final_dir);
  apply_retention(run_dir, policy, state.step);  // only now is the new checkpoint durable
  return final_dir;
}

}  // namespace

fs::path save_checkpoint(const fs::path& run_dir, const GPTImpl& model, const torch::optim::AdamW& opt,
                         const TrainState& state, const RetentionPolicy& policy) {
  return save(run_dir, model, &opt, state, policy);
}

fs::path save_weights_checkpoint(const fs::path& run_dir, const GPTImpl& model, const TrainState& state) {
  RetentionPolicy keep_all;
  keep_all.keep_last = std::numeric_limits<int64_t>::max();
  return save(run_dir, model, nullptr, state, keep_all);
}

LoadedCheckpoint load_checkpoint(const fs::path& ckpt_dir, bool with_optimizer) {
  const detail::StateFile s = detail::read_state_file(ckpt_dir / kStateFile);
  LoadedCheckpoint ckpt;
  ckpt.dir = ckpt_dir;
  ckpt.state = s.state;
  ckpt.model_config = s.model;
  ckpt.weights = read_verified(ckpt_dir, kModelFile, s.files).tensors;
  if (with_optimizer) {
    SafetensorsContents adamw = read_verified(ckpt_dir, kOptimizerFile, s.files);
    ckpt.optimizer_groups = parse_groups(adamw.metadata, ckpt_dir / kOptimizerFile);
    ckpt.optimizer = std::move(adamw.tensors);
  }
  return ckpt;
}

std::optional<LoadedCheckpoint> load_latest(const fs::path& run_dir, std::vector<std::string>* warnings,
                                            bool with_optimizer) {
  const auto all = list_checkpoints(run_dir);
  if (all.empty()) return std::nullopt;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      return load_checkpoint(it->dir, with_optimizer);
    } catch (const CheckpointError& e) {
      const std::string message = "skipping checkpoint " + it->dir.string() + " (" + e.what() +
                                  "); falling back to the previous one";
      spdlog::warn("{}", message);
      if (warnings != nullptr) warnings->push_back(message);
    }
  }
  throw CheckpointError(run_dir, "none of its " + std::to_string(all.size()) +
                                     " checkpoints is readable (each one's problem was logged)");
}

void restore_model(const LoadedCheckpoint& ckpt, GPTImpl& model) {
  check_same_model(ckpt, model);
  check_weights(ckpt, model);
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) item.value().copy_(ckpt.weights.at(item.key()));
}

void restore_optimizer(const LoadedCheckpoint& ckpt, const GPTImpl& model, torch::optim::AdamW& opt) {
  const fs::path file = ckpt.dir / kOptimizerFile;
  if (ckpt.optimizer_groups.empty()) throw CheckpointError(file, "was not loaded (load_checkpoint without the optimizer)");
  detail::restore_adamw_state({ckpt.optimizer, ckpt.optimizer_groups}, model, opt, file);
}

void restore(const LoadedCheckpoint& ckpt, GPTImpl& model, torch::optim::AdamW& opt) {
  restore_model(ckpt, model);
  restore_optimizer(ckpt, model, opt);
  restore_rng_states(ckpt.state.rng, ckpt.dir / kStateFile);
}

LoadedModel load_model(const fs::path& path, std::vector<std::string>* warnings) {
  if (detail::is_file(path)) {
    if (path.filename() == kStateFile) return model_from(load_checkpoint(path.parent_path(), false), path.parent_path());
    return model_from_file(path);
  }
  if (detail::is_file(path / kStateFile)) return model_from(load_checkpoint(path, false), path);
  if (detail::is_dir(checkpoints_dir(path))) {
    auto ckpt = load_latest(path, warnings, /*with_optimizer=*/false);
    if (!ckpt) throw CheckpointError(path, "run directory has no checkpoint");
    return model_from(*ckpt, ckpt->dir);
  }
  throw CheckpointError(path, "is neither a run directory, a checkpoint directory nor a model.safetensors file");
}

}  // namespace attnlab
