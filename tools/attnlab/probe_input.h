// What `attnlab retention` and `attnlab ablate` share: a checkpoint (with its AdamW state when the
// directory has one), the model rebuilt from it, deterministic validation batches, provenance, and
// writing the output files.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnlab/batch_sampler.h"
#include "attnlab/checkpoint.h"

namespace attnlab::cli {

struct ProbeInput {
  LoadedCheckpoint ckpt;       ///< optimizer tensors loaded when optimizer.safetensors exists
  bool has_optimizer = false;
  GPT model{nullptr};          ///< on the chosen device, eval mode
  std::vector<Batch> batches;  ///< validation batches 0..n-1 of batch_size sequences
  nlohmann::json provenance;   ///< checkpoint, step, arm, seed, data, batches, ...
};

struct ProbeArgs {
  std::string checkpoint;  ///< checkpoint directory, its state.json, or a run directory (newest)
  std::string data;        ///< val shard glob; empty = the run's data.val
  int64_t batches = 1, batch_size = 8, seq_len = 0;  ///< seq_len 0 = the run's train.seq_len
  std::string device = "cpu";
};

/// Throws CheckpointError / DataError / std::invalid_argument naming the culprit.
ProbeInput open_probe(const ProbeArgs& args);

/// Writes `text` to dir/name (creating dir); throws std::runtime_error naming the file on failure.
void write_output(const std::filesystem::path& dir, const std::string& name, const std::string& text);

/// A JSON number, or null for NaN / infinity.
nlohmann::json number_or_null(double v);

}  // namespace attnlab::cli
