// The front door for a trained run: one call opens a checkpoint, rebuilds its model, chooses the
// validation tokens an analysis reads and records where everything came from (docs/design.md). Every
// command that reads a trained model goes through it (eval, probe, inject, retention, ablate,
// activations) or through its token-free part, open_model() (sample, export-hf), so they share one
// reading of a path, one choice of defaults, one provenance record and one rule for the run's
// tokenizer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <nlohmann/json_fwd.hpp>

#include "attnlab/batch_sampler.h"
#include "attnlab/checkpoint.h"
#include "attnlab/final_record.h"
#include "attnlab/run_config.h"
#include "attnlab/shards.h"

namespace attnlab {

/// The device analyses run on unless told otherwise: the CPU, so a result does not depend on the
/// machine it was computed on.
inline constexpr const char* kAnalysisDevice = "cpu";

/// Which validation tokens an analysis reads: consecutive sequences of T tokens from the start of the
/// validation stream (the run's own validation set, docs/data.md), or windows drawn with a seed.
struct TokenChoice {
  std::string data;         ///< glob of llm.c-format val shards; empty = the run's data.val
  int64_t sequences = 32;   ///< N (ignored when `tokens` > 0)
  int64_t tokens = 0;       ///< > 0: every whole sequence within the first `tokens` tokens instead
  int64_t length = 0;       ///< T tokens per sequence; 0 = the run's train.seq_len
  int64_t batch_size = 8;   ///< sequences per forward pass (memory only)
  std::optional<uint64_t> seed;  ///< N windows drawn by BatchSampler(seed, step 0) instead
};

struct OpenOptions {
  TokenChoice tokens;
  std::string device = kAnalysisDevice;  ///< "auto" | "cpu" | "cuda" (resolve_device)
  bool with_optimizer = false;  ///< also read the AdamW state when the checkpoint has one
};

/// Where an analysis's numbers came from; every command writes it the same way (to_json).
struct Provenance {
  std::string checkpoint;               ///< the checkpoint directory (or model file) read
  int64_t step = 0;                     ///< its optimizer step
  std::string arm;
  std::optional<std::string> tier;      ///< the run's; none for a lone model file without its config
  std::optional<uint64_t> run_seed;     ///< the run's seed; likewise
  std::optional<ParentRecord> parent;   ///< a branch run's parent checkpoint
  std::string data;                     ///< the val shard glob
  std::vector<std::string> data_files;  ///< the shards it matched
  int64_t sequences = 0, length = 0, batch_size = 0;  ///< N, T, sequences per forward pass
  std::optional<uint64_t> probe_seed;   ///< TokenChoice::seed
  std::string selection;                ///< how the tokens were chosen, in words
  std::optional<uint64_t> val_fingerprint;  ///< ValidationSet::fingerprint() of consecutive sequences
  std::string device;                   ///< e.g. "cpu"
  std::optional<bool> optimizer_state;  ///< when asked for: whether the checkpoint had AdamW state
  std::string dtype;                    ///< the analysis's precision, in words
  std::string attention;                ///< which attention path the analysis ran, in words
  std::string attnlab;                  ///< "<version> (<git revision>)" of the binary
};

/// Every field; absent optionals are null, so every command's provenance has the same keys.
nlohmann::json to_json(const Provenance& provenance);

/// Reads to_json()'s object back (a cached result's provenance). Throws std::invalid_argument naming
/// the first key that is missing or of the wrong type.
Provenance provenance_from_json(const nlohmann::json& j);

/// A trained model ready for an analysis.
struct TrainedRun {
  GPT model{nullptr};                ///< on `device`, eval mode, its own attention backend
  ModelConfig model_config;
  std::optional<RunConfig> config;   ///< the run's config; none for a lone model file without one
  std::optional<LoadedCheckpoint> optimizer;  ///< the AdamW state (weights dropped) when asked and present
  std::optional<ValidationSet> validation;  ///< the consecutive sequences chosen; none with a seed
  std::vector<Batch> batches;        ///< the chosen sequences, batch_size per batch (CPU tensors)
  c10::Device device{c10::kCPU};
  Provenance provenance;

  /// `config`, or std::invalid_argument naming the checkpoint when it carries none (a lone model
  /// file saved without its run's config) and the analysis needs it.
  const RunConfig& run_config() const;
};

/// The model `path` names, in eval mode on the CPU: a run directory (RunDir::is_run: its newest
/// checkpoint that loads into a model, each one skipped logged), a checkpoint directory, its
/// state.json or a model.safetensors (load_model). Throws CheckpointError naming the path when it
/// is none of these, or the file at fault when nothing there loads.
LoadedModel open_model(const std::filesystem::path& path);

/// The run's tokenizer: the one rule every command follows (docs/data.md, "The run's tokenizer").
/// The tokenizer.json beside the run's shards: in the directory of data.train's pattern and of
/// data.val's (read relative to the current directory, as the trainer read them; a pattern whose
/// directory part holds a wildcard is expanded, and then its shards must be here), the first one
/// present (the trainer checked that those present agree). Where there is none (llm.c's shards
/// come without one, or a lone model file carries no config), the ids are GPT-2 BPE's when
/// `vocab_size` is GPT-2's 50257 (kGpt2VocabSize; `assumed`, eot 50256) and unknown otherwise
/// (`tokenizer` "unknown"). Throws DataError naming the file when a tokenizer.json is damaged, or
/// the pattern when an expanded one matches nothing.
TokenizerInfo run_tokenizer(const std::optional<RunConfig>& config, int64_t vocab_size);

/// Opens `checkpoint` (what open_model() opens) and chooses its tokens. T defaults to the
/// run's train.seq_len and the data to its data.val; a lone model file without its config needs
/// both given. Throws CheckpointError / DataError naming the culprit, std::invalid_argument when T
/// exceeds the model's context, the data hold fewer than N sequences, or a count is not positive.
TrainedRun open_trained(const std::filesystem::path& checkpoint, const OpenOptions& options);

}  // namespace attnlab
