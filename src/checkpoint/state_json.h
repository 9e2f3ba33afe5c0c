// state.json of a checkpoint: TrainState, the model's dimensions and the files' checksums as JSON,
// and back with every field checked (docs/checkpoints.md lists the fields and their rules). Its own
// SHA-256 lies beside it in state.json.sha256, in the format of `sha256sum`.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnlab/checkpoint.h"

namespace attnlab::detail {

inline constexpr const char* kStateFile = "state.json";
inline constexpr const char* kModelFile = "model.safetensors";
inline constexpr const char* kOptimizerFile = "optimizer.safetensors";
inline constexpr const char* kStateChecksumFile = "state.json.sha256";

/// The step of a directory named step_<digits> (at most 18 digits), or -1 for any other name.
int64_t step_of_dir_name(const std::string& name);

/// Up to three of `names`, quoted and comma-separated, then "and N more": for error messages.
std::string quoted_names(const std::vector<std::string>& names);

/// The model `j` (state.json's "model", or model.safetensors' attnlab.model) describes, read by
/// model_config_to_json's key list (model_config_json.h) and validated. Throws CheckpointError naming
/// `origin` on a missing, mistyped or impossible field.
ModelConfig read_model_config(const nlohmann::json& j, const std::filesystem::path& origin);

struct StateFile {
  TrainState state;
  ModelConfig model;
  /// {"<file name>": {"sha256": "<hex>", "bytes": n}} for each tensor file of the checkpoint.
  nlohmann::json files = nlohmann::json::object();
};

/// The rules of a TrainState that state.json records: step, tokens_seen, data_position >= 0,
/// tokens_seen >= step for a trained checkpoint (`trained`: it holds optimizer state; a weights-only
/// checkpoint imported from elsewhere need not know its tokens), val_loss finite and >= 0 or NaN (not
/// evaluated), best_val_loss finite and >= 0 or +inf (none yet), best_val_loss <= val_loss. Throws
/// CheckpointError naming `file`.
void check_train_state(const TrainState& t, const std::filesystem::path& file, bool trained = true);

nlohmann::json state_file_to_json(const StateFile& s);

/// state.json's "config" (and model.safetensors' attnlab.config): the resolved run config, or {}
/// for none.
nlohmann::json config_to_json(const std::optional<RunConfig>& config);
/// Reads it back: {} is none; anything else must be a run config load_run_config's checks pass.
/// Throws CheckpointError naming `file`.
std::optional<RunConfig> config_from_json(const nlohmann::json& config, const std::filesystem::path& file);
/// What `sha256sum state.json` prints for a state.json holding `state_text`: "<hex>  state.json\n".
std::string state_checksum_line(const std::string& state_text);

/// Reads and checks `file`: its SHA-256 against state.json.sha256 beside it (format 2; format 1
/// predates the sidecar), the format name and version, every field's type, check_train_state, and
/// step equal to the directory's when that is named step_<N>.
/// Throws CheckpointError naming the file at fault (state.json or its sidecar) on any problem.
StateFile read_state_file(const std::filesystem::path& file);

}  // namespace attnlab::detail
