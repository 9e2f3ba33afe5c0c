// state.json of a checkpoint: TrainState, the model's dimensions and the files' checksums as JSON,
// and back with every field checked (docs/checkpoints.md lists the fields).
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

#include "attnlab/checkpoint.h"

namespace attnlab::detail {

inline constexpr const char* kStateFile = "state.json";
inline constexpr const char* kModelFile = "model.safetensors";
inline constexpr const char* kOptimizerFile = "optimizer.safetensors";

nlohmann::json model_config_to_json(const ModelConfig& cfg);
/// Throws CheckpointError naming `origin` on a missing, mistyped or impossible field.
ModelConfig model_config_from_json(const nlohmann::json& j, const std::filesystem::path& origin);

struct StateFile {
  TrainState state;
  ModelConfig model;
  /// {"<file name>": {"sha256": "<hex>", "bytes": n}} for each tensor file of the checkpoint.
  nlohmann::json files = nlohmann::json::object();
};

nlohmann::json state_file_to_json(const StateFile& s);
/// Reads and checks `file` (format name and version, every field's type).
/// Throws CheckpointError naming it on any problem.
StateFile read_state_file(const std::filesystem::path& file);

}  // namespace attnlab::detail
