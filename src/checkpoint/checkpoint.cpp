// Saving (atomic), loading (verified, with fallback) and restoring (bit-exact) checkpoints.
#include "attnlab/checkpoint.h"

#include <cerrno>
#include <cstring>
#include <set>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "attnlab/model_config_json.h"
#include "attnlab/version.h"
#include "common/durable_file.h"
#include "checkpoint/file_ops.h"
#include "checkpoint/optimizer_state.h"
#include "checkpoint/sha256.h"
#include "checkpoint/state_json.h"
#include "common/input_file.h"
#include "common/json_read.h"

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
constexpr const char* kMetaOptimizer = "attnlab.optimizer";  // absent = adamw (files from before it existed)

// ---- saving -----------------------------------------------------------------------------------

/// Leftovers of a crashed save or deletion: hidden siblings that are never a checkpoint.
void remove_hidden_leftovers(const fs::path& root) {
  for (const auto& name : detail::list_directory(root)) {
    if (name.rfind(".tmp.", 0) == 0 || name.rfind(".old.", 0) == 0) detail::remove_tree(root / name);
  }
}

void make_checkpoints_root(const fs::path& root) {
  if (detail::make_directories(root)) {
    detail::fsync_directory(root.parent_path().empty() ? "." : root.parent_path());  // the new entry must itself be durable
  }
}

json file_record(const fs::path& file) {
  const auto bytes = detail::file_bytes(file);
  if (!bytes) throw CheckpointError(file, "vanished after it was written");
  return {{"sha256", detail::sha256_file(file)}, {"bytes", *bytes}};
}

/// A checkpoint holds finite numbers only: a diverged model is never saved as a good one.
void refuse_non_finite(const TensorMap& tensors, const fs::path& file) {
  for (const auto& [name, t] : tensors) {
    if (at::isFloatingType(t.scalar_type()) && !at::isfinite(t).all().item<bool>()) {
      throw CheckpointError(file, "tensor '" + name +
                                      "' holds NaN or infinity; refusing to save it (the model has "
                                      "diverged; nothing was written, the checkpoints already saved are kept)");
    }
  }
}

/// What a checkpoint of `model` and `opt` holds, refused when not finite; files are named as they
/// will be under `final_dir`. Without `opt` (an imported model) there is no optimizer state.
struct Tensors {
  TensorMap weights;
  bool has_optimizer = false;
  detail::OptimizerTensors optimizer;
};

Tensors gather(const GPTImpl& model, const torch::optim::Optimizer* opt, const fs::path& final_dir) {
  Tensors out;
  for (const auto& item : model.named_parameters()) out.weights[item.key()] = item.value();
  refuse_non_finite(out.weights, final_dir / kModelFile);
  if (opt != nullptr) {
    out.has_optimizer = true;
    out.optimizer = detail::optimizer_state(model, *opt, final_dir / kOptimizerFile);
    refuse_non_finite(out.optimizer.tensors, final_dir / kOptimizerFile);
  }
  return out;
}

/// JSON text for `file`; a string that is not UTF-8 (JSON cannot hold it) is a CheckpointError.
std::string dump_for(const json& j, const fs::path& file, int indent = -1) {
  try {
    return j.dump(indent);
  } catch (const json::exception& e) {
    throw CheckpointError(file, std::string("cannot encode as JSON: ") + e.what());
  }
}

void write_files(const fs::path& dir, const Tensors& tensors, const ModelConfig& model, const TrainState& state) {
  const std::string step = std::to_string(state.step);
  write_safetensors(dir / kModelFile, tensors.weights,
                    {{"format", "pt"},
                     {kMetaModel, dump_for(model_config_to_json(model), dir / kModelFile)},
                     {kMetaConfig, dump_for(detail::config_to_json(state.config), dir / kModelFile)},
                     {kMetaStep, step}});
  if (tensors.has_optimizer) {
    const auto& o = tensors.optimizer;
    SafetensorsMetadata meta{{"format", "pt"}, {kMetaGroups, dump_for(o.groups, dir / kOptimizerFile)}, {kMetaStep, step}};
    if (o.name != OptimizerName::adamw) meta[kMetaOptimizer] = to_string(o.name);  // AdamW's bytes stay as they were
    write_safetensors(dir / kOptimizerFile, o.tensors, meta);
  }

  detail::StateFile s{state, model, json::object()};
  s.state.git_revision = git_revision();
  s.state.rng = capture_rng_states();
  s.files[kModelFile] = file_record(dir / kModelFile);
  if (tensors.has_optimizer) s.files[kOptimizerFile] = file_record(dir / kOptimizerFile);
  const std::string text = dump_for(detail::state_file_to_json(s), dir / kStateFile, 2) + "\n";
  detail::write_file_durably(dir / kStateFile, text);
  detail::write_file_durably(dir / detail::kStateChecksumFile, detail::state_checksum_line(text));
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
  std::string why = "not a list";
  try {
    json groups = detail::parse_json(it->second);
    if (groups.is_array()) return groups;
  } catch (const detail::JsonError& e) {
    why = e.what();
  }
  throw CheckpointError(file, std::string("metadata ") + kMetaGroups + " is not a JSON list (" + why + ")");
}

/// The optimizer that wrote an optimizer.safetensors: its metadata's name, adamw when absent.
OptimizerName parse_optimizer_name(const SafetensorsMetadata& metadata, const fs::path& file) {
  const auto it = metadata.find(kMetaOptimizer);
  if (it == metadata.end()) return OptimizerName::adamw;
  const auto name = name_table<OptimizerName>().find(it->second);
  if (!name) throw CheckpointError(file, name_table<OptimizerName>().refusal(it->second, std::string("metadata ") + kMetaOptimizer));
  return *name;
}

// ---- restoring --------------------------------------------------------------------------------

void check_same_model(const LoadedCheckpoint& ckpt, const GPTImpl& model) {
  const json saved = model_config_to_json(ckpt.model_config);
  const json here = model_config_to_json(model.config());
  // Over the keys of both: an optional key (a window) missing on one side is null there.
  std::set<std::string> keys;
  for (const auto* j : {&saved, &here})
    for (const auto& [key, value] : j->items()) keys.insert(key);
  std::string differences;
  for (const auto& key : keys) {
    const json a = saved.value(key, json()), b = here.value(key, json());
    if (a != b) differences += " " + key + " (" + a.dump() + " vs " + b.dump() + ")";
  }
  if (!differences.empty()) {
    throw CheckpointError(ckpt.dir, "checkpoint's model differs from this model in:" + differences);
  }
}

/// Throws unless the weights hold exactly the model's parameter names, each with its parameter's
/// shape and dtype and only finite values.
void check_weights(const LoadedCheckpoint& ckpt, const GPTImpl& model, const fs::path& file) {
  std::set<std::string> names;
  for (const auto& item : model.named_parameters()) {
    const at::Tensor& param = item.value();
    const auto it = ckpt.weights.find(item.key());
    if (it == ckpt.weights.end()) throw CheckpointError(file, "has no tensor '" + item.key() + "'");
    const at::Tensor& w = it->second;
    if (!w.sizes().equals(param.sizes())) {
      throw CheckpointError(file, "tensor '" + item.key() + "' has shape " + c10::str(w.sizes()) + ", the model's " +
                                      c10::str(param.sizes()));
    }
    if (w.scalar_type() != param.scalar_type()) {
      throw CheckpointError(file, "tensor '" + item.key() + "' is " + safetensors_dtype(w.scalar_type(), file) +
                                      ", the model's parameter " + safetensors_dtype(param.scalar_type(), file));
    }
    if (!at::isfinite(w).all().item<bool>())
      throw CheckpointError(file, "tensor '" + item.key() + "' holds NaN or infinity");
    names.insert(item.key());
  }
  std::vector<std::string> extra;
  for (const auto& [name, w] : ckpt.weights)
    if (!names.count(name)) extra.push_back(name);
  if (!extra.empty()) {
    throw CheckpointError(file, std::to_string(extra.size()) +
                                    " tensors name no parameter of this model: " + detail::quoted_names(extra));
  }
}

/// check_same_model + check_weights (naming `file`, where the weights came from), then the copy.
void restore_weights(const LoadedCheckpoint& ckpt, GPTImpl& model, const fs::path& file) {
  check_same_model(ckpt, model);
  check_weights(ckpt, model, file);
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) item.value().copy_(ckpt.weights.at(item.key()));
}

fs::path optimizer_loaded(const LoadedCheckpoint& ckpt, const fs::path& file) {
  if (ckpt.optimizer_groups.empty())
    throw CheckpointError(file, "was not loaded (load_checkpoint without the optimizer)");
  return file;
}

/// `source` is the checkpoint directory, or the file the weights came from.
LoadedModel model_from(const LoadedCheckpoint& ckpt, const fs::path& source) {
  LoadedModel out;
  out.model = GPT(ckpt.model_config);
  restore_weights(ckpt, *out.model, detail::is_dir(source) ? source / kModelFile : source);
  out.model->eval();
  out.model_config = ckpt.model_config;
  out.config = ckpt.state.config;
  out.trainer = ckpt.state.trainer;
  out.step = ckpt.state.step;
  out.source = source;
  return out;
}

/// The step in a model.safetensors' metadata: decimal digits.
int64_t metadata_step(const std::string& text, const fs::path& file) {
  const int64_t step = detail::step_of_dir_name("step_" + text);
  if (step < 0) throw CheckpointError(file, std::string("metadata ") + kMetaStep + " is \"" + text + "\", not a step");
  return step;
}

/// A lone model.safetensors: its metadata stands in for state.json (nothing records its checksum).
LoadedModel model_from_file(const fs::path& file) {
  SafetensorsContents contents = read_safetensors(file);
  const auto& meta = contents.metadata;
  if (!meta.count(kMetaModel)) throw CheckpointError(file, std::string("metadata lacks ") + kMetaModel);
  LoadedCheckpoint ckpt;
  ckpt.dir = file.parent_path();
  json config = json::object();
  try {
    ckpt.model_config = detail::read_model_config(detail::parse_json(meta.at(kMetaModel)), file);
    if (meta.count(kMetaConfig)) config = detail::parse_json(meta.at(kMetaConfig));
  } catch (const detail::JsonError& e) {
    throw CheckpointError(file, std::string("bad attnlab metadata: ") + e.what());
  }
  if (!config.is_object()) throw CheckpointError(file, std::string("metadata ") + kMetaConfig + " is not a JSON object");
  ckpt.state.config = detail::config_from_json(config, file);
  if (meta.count(kMetaStep)) ckpt.state.step = metadata_step(meta.at(kMetaStep), file);
  ckpt.weights = std::move(contents.tensors);
  return model_from(ckpt, file);
}

}  // namespace

namespace {

fs::path save(const fs::path& root, const GPTImpl& model, const torch::optim::Optimizer* opt,
              const TrainState& state, const RetentionPolicy& policy) {
  if (policy.keep_last < 1) throw std::invalid_argument("checkpoint retention: keep_last must be at least 1");
  const fs::path final_dir = checkpoint_dir(root, state.step);
  detail::check_train_state(state, final_dir / kStateFile, opt != nullptr);  // never write what the reader refuses
  const Tensors tensors = gather(model, opt, final_dir);
  make_checkpoints_root(root);
  remove_hidden_leftovers(root);
  const fs::path tmp = root / (".tmp." + final_dir.filename().string());
  detail::make_directories(tmp);
  try {
    write_files(tmp, tensors, model.config(), state);
    detail::fsync_directory(tmp);
  } catch (...) {
    detail::remove_tree(tmp);  // nothing half-written stays behind
    throw;
  }
  publish(tmp, final_dir);
  apply_retention(root, policy, state.step);  // only now is the new checkpoint durable
  return final_dir;
}

}  // namespace

fs::path save_checkpoint(const fs::path& root, const GPTImpl& model, const torch::optim::Optimizer& opt,
                         const TrainState& state, const RetentionPolicy& policy) {
  return save(root, model, &opt, state, policy);
}

fs::path save_weights_checkpoint(const fs::path& root, const GPTImpl& model, const TrainState& state) {
  RetentionPolicy keep_all;
  keep_all.keep_last = std::numeric_limits<int64_t>::max();
  return save(root, model, nullptr, state, keep_all);
}

LoadedCheckpoint load_checkpoint(const fs::path& ckpt_dir, bool with_optimizer) {
  const detail::StateFile s = detail::read_state_file(ckpt_dir / kStateFile);
  LoadedCheckpoint ckpt;
  ckpt.dir = ckpt_dir;
  ckpt.state = s.state;
  ckpt.model_config = s.model;
  ckpt.weights = read_verified(ckpt_dir, kModelFile, s.files).tensors;
  if (with_optimizer) {
    SafetensorsContents optimizer = read_verified(ckpt_dir, kOptimizerFile, s.files);
    ckpt.optimizer_groups = parse_groups(optimizer.metadata, ckpt_dir / kOptimizerFile);
    ckpt.optimizer_name = parse_optimizer_name(optimizer.metadata, ckpt_dir / kOptimizerFile);
    ckpt.optimizer = std::move(optimizer.tensors);
  }
  return ckpt;
}

std::optional<LoadedCheckpoint> load_latest(const fs::path& root, std::vector<std::string>* warnings,
                                            bool with_optimizer, const CheckpointCheck& check) {
  const auto all = list_checkpoints(root);
  if (all.empty()) return std::nullopt;
  std::string newest_problem;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      LoadedCheckpoint ckpt = load_checkpoint(it->dir, with_optimizer);
      if (check) check(ckpt);
      return ckpt;
    } catch (const CheckpointError& e) {
      if (newest_problem.empty()) newest_problem = e.what();
      const std::string message = "skipping checkpoint " + it->dir.string() + " (" + e.what() +
                                  "); falling back to the previous one";
      spdlog::warn("{}", message);
      if (warnings != nullptr) warnings->push_back(message);
    }
  }
  throw CheckpointError(root,
                        "none of its " + std::to_string(all.size()) +
                            " checkpoints can be used (each one's problem was logged); the newest: " + newest_problem);
}

void check_restorable(const LoadedCheckpoint& ckpt, const GPTImpl& model, const torch::optim::Optimizer& opt) {
  check_same_model(ckpt, model);
  check_weights(ckpt, model, ckpt.dir / kModelFile);
  const fs::path file = optimizer_loaded(ckpt, ckpt.dir / kOptimizerFile);
  detail::check_optimizer_state({ckpt.optimizer_name, ckpt.optimizer, ckpt.optimizer_groups}, model, opt, file);
  check_rng_states(ckpt.state.rng, ckpt.dir / kStateFile);
}

void restore_model(const LoadedCheckpoint& ckpt, GPTImpl& model) {
  restore_weights(ckpt, model, ckpt.dir / kModelFile);
}

void restore_optimizer(const LoadedCheckpoint& ckpt, const GPTImpl& model, torch::optim::Optimizer& opt) {
  const fs::path file = optimizer_loaded(ckpt, ckpt.dir / kOptimizerFile);
  detail::restore_optimizer_state({ckpt.optimizer_name, ckpt.optimizer, ckpt.optimizer_groups}, model, opt, file);
}

void restore(const LoadedCheckpoint& ckpt, GPTImpl& model, torch::optim::Optimizer& opt) {
  check_restorable(ckpt, model, opt);  // first, so a refused checkpoint changes nothing
  restore_model(ckpt, model);
  restore_optimizer(ckpt, model, opt);
  restore_rng_states(ckpt.state.rng, ckpt.dir / kStateFile);
}

bool is_checkpoint_dir(const fs::path& dir) { return detail::is_file(dir / kStateFile); }

bool has_optimizer_state(const fs::path& dir) { return fs::exists(dir / kOptimizerFile); }

LoadedModel load_model(const LoadedCheckpoint& ckpt) { return model_from(ckpt, ckpt.dir); }

LoadedModel load_model(const fs::path& path) {
  if (detail::is_file(path)) {
    const fs::path dir = path.parent_path();
    // A model.safetensors inside a checkpoint directory is verified against its state.json.
    const bool in_checkpoint =
        path.filename() == kStateFile || (path.filename() == kModelFile && detail::is_file(dir / kStateFile));
    return in_checkpoint ? model_from(load_checkpoint(dir, false), dir) : model_from_file(path);
  }
  if (is_checkpoint_dir(path)) return model_from(load_checkpoint(path, false), path);
  const std::string kind = detail::describe_file_kind(path);  // a FIFO, a device, a directory of something else
  throw CheckpointError(path, (kind == "missing" ? "does not exist" : "is " + kind) +
                                  ", neither a checkpoint directory (holding state.json) nor a model.safetensors file");
}

}  // namespace attnlab
