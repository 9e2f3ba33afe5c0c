// Hugging Face interop both ways (docs/interop.md has the name mapping tables and the recipes):
//
//   export_hf   a checkpoint -> a directory transformers loads: a plain GPT-2 (baseline with learned
//               positions) or GPT-NeoX (baseline with rotary positions) directory, or, for every other
//               arm or option mix, attnlab's own modeling file (trust_remote_code).
//   import_hf   a GPT-2 (GPT2LMHeadModel), GPT-NeoX (GPTNeoXForCausalLM, Pythia) or exported attnlab
//               directory, or a directory of such revisions (one sub-directory per training step) ->
//               a run directory of weights-only checkpoints that eval, activations, probe, inject,
//               ablate and retention read.
//
// Weights travel as float32 safetensors. Errors name the file and the key or tensor at fault.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnlab/checkpoint.h"
#include "attnlab/model.h"
#include "attnlab/model_config.h"
#include "attnlab/safetensors.h"

namespace attnlab {

/// A model read from a Hugging Face directory.
struct HfModel {
  std::string model_type;    ///< config.json's model_type: "gpt2", "gpt_neox" or "attnlab"
  ModelConfig config;        ///< the architecture config.json describes (arm baseline unless attnlab)
  GPT model{nullptr};        ///< float32, on the CPU, in eval mode
  nlohmann::json hf_config;  ///< config.json as read
};

/// Reads `dir`/config.json and its weights (model.safetensors, or the shards model.safetensors.index.json
/// lists) into a model, converting names and layouts (to float32): GPT-2's Conv1D weights are
/// transposed, GPT-NeoX's per-head interleaved query_key_value rows are regrouped into attnlab's q, k, v
/// blocks, embeddings and untied heads are zero-padded to padded_vocab rows, GPT-NeoX's absent attention
/// biases (attention_bias: false) are zeros; attention-mask and rotary buffers are skipped. Throws CheckpointError naming the file for anything it
/// cannot represent exactly (an unknown model_type or activation, a layer-norm epsilon other than 1e-5,
/// an MLP width other than 4 d_model, rope scaling, a missing, unknown or misshapen tensor, weights only
/// in pytorch_model.bin).
HfModel read_hf_model(const std::filesystem::path& dir);

struct HfImportOptions {
  int64_t step = 0;                    ///< the checkpoint's step when `source` is one model directory
  std::vector<std::string> overrides;  ///< "key=value" on the run's config (data.val, train.seq_len,
                                       ///< optim.weight_decay, ...); model.* keys are refused
  /// Tests: called with each revision's step once its checkpoint is written, while the run
  /// directory is still claimed (RunDir::holder() names this process).
  std::function<void(int64_t step)> after_save;
};

struct HfImportResult {
  std::vector<int64_t> steps;  ///< checkpoints written, ascending
  ModelConfig model;
  std::string model_type;
};

/// Writes the new run directory `run_dir` (refused when it exists and is not empty): config.yaml (a
/// full run config: the imported model, tier "imported", data.val / data.train from `overrides` or a
/// placeholder naming the --set to give) and checkpoints/step_<N>/ in the trainer's layout, weights
/// only (save_weights_checkpoint). `source` is one model directory (holding config.json; step
/// options.step) or a directory of revisions, one sub-directory per step whose name ends in the step
/// number ("step1000", "step_001000", "1000"; names starting with '.' are skipped). Every revision
/// must share one architecture. Nothing is left behind on failure. Throws CheckpointError or
/// std::invalid_argument naming the culprit.
HfImportResult import_hf(const std::filesystem::path& source, const std::filesystem::path& run_dir,
                         const HfImportOptions& options = {});

/// What export_hf writes.
enum class HfExportKind {
  gpt2,      ///< GPT2LMHeadModel, no custom code
  gpt_neox,  ///< GPTNeoXForCausalLM, no custom code
  attnlab,   ///< AttnlabForCausalLM from the copied modeling files (trust_remote_code=True)
};
std::string to_string(HfExportKind kind);

/// The features of `arm` (after with_routing_gate) as attnlab's config.json spells them: sink, gate,
/// gate_slot, sink_token, out_gate, by the names of arm.h's tables. The modeling code reads them instead
/// of a copy of the arm table; import_hf checks them against the arm; `attnlab arms --json` prints them.
nlohmann::json hf_arm_features(const ArmSpec& arm);

/// The form a model with this config exports to: gpt2 for the baseline arm with learned positions and
/// a sequential residual, gpt_neox for the baseline arm with rotary positions, attnlab otherwise.
HfExportKind hf_export_kind(const ModelConfig& config);

/// A fast tokenizer for a run whose tokens are SentencePiece's or UTF-8 bytes (docs/interop.md,
/// "Tokenizer"): tools/hf_tokenizer.py, run by `python`, writes tokenizer.json and tokenizer_config.json
/// with the `tokenizers` library, which transformers then loads without sentencepiece or protobuf.
struct HfFastTokenizer {
  std::string kind;             ///< "sentencepiece" | "bytes" (tokenizer.json's "tokenizer")
  std::filesystem::path model;  ///< the SentencePiece .model (sentencepiece only)
  int64_t eot = -1;             ///< the document separator id (tokenizer.json's "eot"): bos, eos, and put before a text
  std::filesystem::path python; ///< an interpreter with tokenizers and transformers (sentencepiece and protobuf to read a .model)
  std::filesystem::path script; ///< tools/hf_tokenizer.py
};

struct HfExportOptions {
  /// Directory holding configuration_attnlab.py and modeling_attnlab.py (the repository's
  /// python/attnlab_hf), copied beside an attnlab-kind export. Required for that kind only.
  std::filesystem::path modeling_dir;
  /// GPT-2's BPE ranks (a .tiktoken file); when set, vocab.json, merges.txt and tokenizer_config.json
  /// are written (the model's vocab_size must then be 50257). Empty: no tokenizer files.
  std::filesystem::path gpt2_tiktoken;
  /// The document separator of the run's tokenizer (tokenizer.json's "eot"), written as config.json's
  /// bos_token_id and eos_token_id; -1: 50256 for GPT-2's vocabulary, else null.
  int64_t eot = -1;
  /// When set, the fast tokenizer it describes is written (not with gpt2_tiktoken).
  std::optional<HfFastTokenizer> fast_tokenizer;
};

struct HfExportResult {
  HfExportKind kind;
  std::vector<std::string> files;  ///< names written into the output directory
};

/// Writes `model` (the real vocabulary only: padded embedding rows are cut) into the new directory
/// `out` (refused when it exists and is not empty; written under a hidden sibling and renamed, so a
/// failure leaves nothing): config.json with the run's provenance under "attnlab_provenance" (arm, seed, step,
/// config hash, source), model.safetensors, the modeling files or the tokenizer files as above.
/// Throws CheckpointError naming the file at fault, std::invalid_argument for a bad option,
/// std::runtime_error when the fast tokenizer's Python is missing or fails (naming it).
HfExportResult export_hf(const LoadedModel& model, const std::filesystem::path& out,
                         const HfExportOptions& options = {});

}  // namespace attnlab
