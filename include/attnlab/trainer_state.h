// The trainer's own fields of a checkpoint: state.json's "extra" object (docs/checkpoints.md), typed.
// The trainer and import-hf write them, open_trained() and the provenance of every analysis read
// them; no one else spells their keys.
//
//   "extra": {"elapsed_s": 12.5,                                     wall seconds trained up to here
//             "parent": {"checkpoint": "<dir>", "step": 100},       a branch run (--branch-from)
//             "imported_from": {"path", "model_type", "hf_config"}}  an import-hf checkpoint
//
// Each key is optional (a checkpoint of an older build may lack any); keys this build does not know
// are ignored, so a checkpoint written by a later build still loads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace attnlab {

/// The checkpoint a branch run started from (`attnlab train --branch-from`).
struct ParentRecord {
  std::string checkpoint;  ///< its directory, as the trainer read it
  int64_t step = 0;
};

/// Where the weights of an imported checkpoint came from (`attnlab import-hf`, docs/interop.md).
struct ImportRecord {
  std::string path;        ///< the Hugging Face model directory, absolute
  std::string model_type;  ///< its config.json's model_type ("gpt2", "gpt_neox", "attnlab")
  nlohmann::json hf_config = nlohmann::json::object();  ///< that config.json as read (foreign JSON, kept whole)
};

struct TrainerState {
  /// Wall seconds spent training the run up to this checkpoint, every session of it; a resume
  /// continues the count. None for a checkpoint that was never trained here (import-hf).
  std::optional<double> elapsed_s;
  std::optional<ParentRecord> parent;         ///< a branch run's parent checkpoint
  std::optional<ImportRecord> imported_from;  ///< an imported checkpoint's source
};

/// {"checkpoint", "step"}: how state.json, final.json and every provenance record write a parent.
nlohmann::json to_json(const ParentRecord& parent);

/// The "extra" object: only the keys whose field is set, so a run's state.json has exactly the keys
/// earlier builds wrote ("elapsed_s", and "parent" for a branch).
nlohmann::json to_json(const TrainerState& state);

/// Reads the "extra" object back. Throws std::invalid_argument naming the key's path
/// ("extra.parent.step") when a known key has the wrong type, or when elapsed_s is negative or not
/// finite; unknown keys are ignored.
TrainerState trainer_state_from_json(const nlohmann::json& extra);

}  // namespace attnlab
