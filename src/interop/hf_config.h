// config.json of a Hugging Face directory <-> ModelConfig, for the three kinds export_hf writes and
// import_hf reads (the key tables of docs/interop.md), and the JSON files the interop reads.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

#include "attnlab/hf_interop.h"

namespace attnlab::interop {

struct HfArchitecture {
  HfExportKind kind = HfExportKind::gpt2;
  ModelConfig model;
  bool attention_bias = true;  ///< GPT-NeoX's attention_bias: without it the attention biases are zero
};

/// The JSON document in `file` (config.json, model.safetensors.index.json). Throws CheckpointError naming
/// the file when it is missing or not JSON.
nlohmann::json read_json_file(const std::filesystem::path& file);

/// The architecture `config` (the content of `file`) describes. Throws CheckpointError naming `file` and
/// the key for a model_type other than gpt2, gpt_neox or attnlab, or any setting attnlab's model cannot
/// compute exactly (docs/interop.md lists them).
HfArchitecture architecture_from_hf(const nlohmann::json& config, const std::filesystem::path& file);

/// config.json of a `kind` export of `model` (without provenance), float32 weights. bos_token_id and
/// eos_token_id are `eot` (the document separator); when it is -1, 50256 for GPT-2's vocabulary, else null.
nlohmann::json hf_config_json(HfExportKind kind, const ModelConfig& model, int64_t eot = -1);

}  // namespace attnlab::interop
