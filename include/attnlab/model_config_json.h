// A ModelConfig as JSON: how a checkpoint stores its model (state.json's "model", model.safetensors'
// attnlab.model; docs/checkpoints.md) and attnlab's own config.json carries it (docs/interop.md). The
// keys are those of a run config's `model:` section (docs/config.md), read and written through the
// same key list, so the YAML, the checkpoints and the exports cannot name different keys.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "attnlab/model_config.h"

namespace attnlab {

/// Every key of `model`: integers, floats, booleans and strings, enums by their names; an unset window
/// key is left out, so a model without a window has the bytes it had before windows. The same object
/// as to_json(RunConfig)["model"] of a run of this model (run_config.h).
nlohmann::json model_config_to_json(const ModelConfig& model);

/// The model keys of the JSON object `j`; its other keys are not looked at (config.json holds more).
/// The arm, the five dimensions and routing_gate must be present (every file has held them since its
/// first format); any other absent key keeps ModelConfig's default (a file from before the key had it
/// off), and null unsets a window key. The values are not validated: the caller runs
/// ModelConfig::validate() and says whose file is at fault. Throws std::invalid_argument naming the
/// key, for the caller to put the file before it: "'n_layer' is missing", "'n_layer' is not an
/// integer: 2.5" (or a number, true or false, a string), "'gelu': 'x' is not one of tanh, erf".
ModelConfig model_config_from_json(const nlohmann::json& j);

}  // namespace attnlab
