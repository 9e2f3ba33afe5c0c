// The configuration of one training run: records that mirror the YAML keys exactly (SPEC sections 2,
// 3, 6). Files compose with `include:` lists; `--set a.b=c` overrides any key; unknown keys, wrong
// types and impossible values are rejected before any work starts, naming the key's full path.
// docs/config.md states the rules a value must follow (duplicate keys, integers, floats, strings,
// sizes).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "attnlab/attention_backend.h"
#include "attnlab/device.h"
#include "attnlab/document_windows.h"
#include "attnlab/model_config.h"
#include "attnlab/name_table.h"

namespace attnlab {

/// The dtype a CUDA run autocasts its forward pass to (config key `train.precision`).
enum class Precision {
  bf16,  ///< bfloat16 autocast (SPEC section 2)
  fp32,  ///< no autocast
};

/// bf16 | fp32.
template <> const NameTable<Precision>& name_table<Precision>();
std::string to_string(Precision precision);

struct AttentionConfig {
  /// auto | fused | reference | sdpa | flash | cudnn; validate() asks the backend's row of the backend
  /// table (backend_table.h) whether it can run the model's calls on train.device.
  AttentionBackend backend = AttentionBackend::automatic;
};

struct DataConfig {
  std::string train;          ///< glob of llm.c-format train shards
  std::string val;            ///< glob of validation shards
  int64_t val_tokens = 65536; ///< fixed held-out tokens used by every evaluation (SPEC section 3)
  /// Where training windows start and how the validation set is cut (docs/data.md): unset (or
  /// `random`, which reads as unset) the uniform offsets and the consecutive cut; `document` the
  /// document-aligned windows of document_windows.h, which needs the data's document separator.
  /// Part of the config hash when set; configs without it keep their bytes and hash.
  std::optional<WindowSampling> sampling;
};

/// The optimizer a run trains with (config key `optim.name`; docs/config.md, docs/design.md).
enum class OptimizerName {
  adamw,  ///< AdamW on every parameter (fused_adamw.h)
  sgd,    ///< torch::optim::SGD with momentum on every parameter, coupled L2 decay on the decayed group
  muon,   ///< Muon on the blocks' hidden matrices, AdamW on everything else (muon.h)
};

/// adamw | sgd | muon.
template <> const NameTable<OptimizerName>& name_table<OptimizerName>();
std::string to_string(OptimizerName name);

struct OptimConfig {
  /// adamw | sgd | muon; unset = adamw, and unset keys are not written, so a config from before the
  /// key existed keeps its config.yaml bytes and config hash. A resume may not change it.
  std::optional<OptimizerName> name;
  double lr = 6e-4;            ///< peak learning rate (Muon: of its AdamW part)
  double min_lr_ratio = 0.1;   ///< cosine decays to lr * min_lr_ratio (SPEC section 2: 10%)
  int64_t warmup_steps = 100;  ///< linear warm-up from lr / warmup_steps
  double weight_decay = 0.1;   ///< lambda, on the decayed group only (SPEC section 1)
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double grad_clip = 1.0;      ///< global L2 norm; 0 disables
  /// sgd and muon only (refused otherwise), each unset = its default: momentum mu in [0, 1) (sgd
  /// 0.9, muon 0.95), Nesterov momentum (sgd false, muon true; needs mu > 0), and muon_lr > 0, the
  /// peak learning rate of Muon's hidden matrices (0.02, Keller Jordan's reference).
  std::optional<double> momentum;
  std::optional<bool> nesterov;
  std::optional<double> muon_lr;

  OptimizerName optimizer() const { return name.value_or(OptimizerName::adamw); }
  double effective_momentum() const { return momentum.value_or(optimizer() == OptimizerName::muon ? 0.95 : 0.9); }
  bool effective_nesterov() const { return nesterov.value_or(optimizer() == OptimizerName::muon); }
  double effective_muon_lr() const { return muon_lr.value_or(0.02); }
};

struct TrainConfig {
  int64_t batch_size = 8;         ///< sequences per micro-batch
  int64_t seq_len = 256;          ///< tokens per sequence (<= model.block_size)
  int64_t tokens_per_step = 0;    ///< tokens per optimizer step; 0 = batch_size * seq_len
  int64_t token_budget = 0;       ///< total training tokens (defines the step count)
  int64_t max_steps = 0;          ///< overrides token_budget / tokens_per_step when > 0
  DeviceChoice device = DeviceChoice::automatic;  ///< auto | cpu | cuda
  Precision precision = Precision::bf16;          ///< bf16 | fp32: autocast dtype on CUDA (CPU always runs fp32)
  int64_t log_every = 10;         ///< steps between progress lines
  int64_t threads = 0;            ///< CPU intra-op threads; 0 = LibTorch's default
};

struct EvalConfig {
  int64_t every = 100;  ///< steps between validation passes (and always at the end)
  /// Multiple-choice task files (token ids, docs/downstream.md) scored at every validation pass; each
  /// task is named by its file stem, which no two may share. Changes nothing the run computes, so it is
  /// an observation key (outside the config hash, free to change on resume), and an empty list is not
  /// written (configs from before it existed keep their bytes).
  std::vector<std::string> tasks;
  /// Token ids whose next-token targets form the "trigger" domain of the validation loss: each pass
  /// also reports the mean loss over targets y[t] whose input x[t] is one of them (val_loss_trigger)
  /// and over the rest (val_loss_other), nats/token (docs/data.md, Bigram-Backcopy). Each id in
  /// [0, model.vocab_size). An observation key like tasks; an empty list is not written.
  std::vector<int64_t> trigger_tokens;
};

struct CheckpointConfig {
  int64_t every = 100;          ///< steps between checkpoints (and always at the end)
  int64_t keep_last = 2;        ///< newest checkpoints kept (plus the best by val loss)
  bool log_spaced = false;      ///< also checkpoint (and keep) steps 1, 2, 4, ..., log_spaced_until (Pythia-style)
  int64_t log_spaced_until = 512;  ///< the last power of two checkpointed when log_spaced (>= 1)
  int64_t keep_every = 0;       ///< also keep every checkpoint whose step is a multiple of this; 0 = off
};

/// Training-time activation tracking (SPEC section 5): every `every` steps one forward pass
/// on a fixed probe batch (the first `sequences` validation sequences), logged into metrics.jsonl as
/// a {"type": "activations"} record. Changes nothing the run computes (tested), so these keys are
/// outside the config hash and may change when a run resumes.
struct ActivationTrackConfig {
  int64_t every = 0;       ///< steps between probes; 0 = off
  int64_t sequences = 4;   ///< probe batch: validation sequences [0, sequences)
  int64_t top_k = 8;       ///< channels listed per state
  double massive_max = 100.0;     ///< "massive": max |x_c| > massive_max ...
  double massive_ratio = 1000.0;  ///< ... and max / median >= massive_ratio
};

struct TrackConfig {
  ActivationTrackConfig activations;
};

struct RunConfig {
  std::string tier = "micro";   ///< informational: the tier file the dims came from
  uint64_t seed = 1;            ///< paired-seed protocol: init and batch order (SPEC section 3)
  /// The parameter initialisation's seed and the batch order's seed, when they differ from `seed`
  /// (unset: `seed`, so a config without them means what it always did). A null (A/A) pair is one
  /// arm under two init seeds with one data seed (docs/sweeps.md, "Null pairs").
  std::optional<uint64_t> init_seed;
  std::optional<uint64_t> data_seed;
  std::string out_dir = "runs/run";
  ModelConfig model;
  AttentionConfig attention;
  DataConfig data;
  OptimConfig optim;
  TrainConfig train;
  EvalConfig eval;
  CheckpointConfig checkpoint;
  TrackConfig track;

  uint64_t effective_init_seed() const { return init_seed.value_or(seed); }  ///< init_parameters' seed
  uint64_t effective_data_seed() const { return data_seed.value_or(seed); }  ///< BatchSampler's seed

  // Valid (without overflow) once validate() has passed.
  int64_t effective_tokens_per_step() const;
  int64_t total_steps() const;       ///< max_steps, else ceil(token_budget / tokens_per_step)
};

/// Error in a configuration: the message starts with the key's full path (or the file).
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Loads `path` (with its `include:` files, relative to the including file, earlier files first,
/// later keys win), applies `overrides` ("a.b=c", value parsed as YAML), checks every key and value.
/// Throws ConfigError naming the file or the key's full path; a key written twice in one mapping is
/// refused naming both lines, and integers are read as YAML 1.2 decimals ("010" is 10, not octal).
RunConfig load_run_config(const std::filesystem::path& path, const std::vector<std::string>& overrides = {});

/// Same from an already-resolved JSON/YAML document (e.g. a checkpoint's stored config).
RunConfig run_config_from_json(const nlohmann::json& resolved);

/// The resolved configuration as JSON (every key, defaults included), and as YAML text: floats in
/// their shortest round-trip form (3e-4 is written 0.0003), config_warnings as comments on top.
nlohmann::json to_json(const RunConfig& cfg);
std::string to_yaml(const RunConfig& cfg);

/// Keys (full paths) whose values differ between two configs, e.g. {"optim.lr", "model.arm"}.
std::vector<std::string> differing_keys(const RunConfig& a, const RunConfig& b);

/// Checks every value: floats finite, strings valid UTF-8 without control characters (so every
/// writer of a run can write them), each key's range, and what no single key can (seq_len <=
/// block_size, tokens_per_step a multiple of batch_size * seq_len, a budget set, val_tokens at
/// least one sequence, products of sizes within 64 bits). Throws ConfigError naming the keys.
void validate(const RunConfig& cfg);

/// Valid settings that probably do not do what was meant, one sentence each (docs/config.md): a
/// warm-up not shorter than the run (the learning rate only rises and never decays). The trainer
/// logs them as warnings at start; to_yaml writes them as comments atop the run's config.yaml.
std::vector<std::string> config_warnings(const RunConfig& cfg);

/// A lower bound on the memory a training step holds, in bytes (docs/config.md, "Sizes"):
/// the parameters of count_params at 16 bytes each (fp32 weights, gradients and AdamW's two
/// moments; 12 under sgd and muon, whose momentum buffer is one) and one micro-batch's logits at 2 bytes each (batch_size * seq_len * padded vocab;
/// bf16 is the narrowest dtype they take). Activations and workspaces come on top.
struct MemoryFloor {
  double weights = 0;
  double logits = 0;
  double total() const { return weights + logits; }
};

/// The floor of a config that has passed validate() (whose sizes then fit 64-bit counts).
MemoryFloor memory_floor(const RunConfig& cfg);

/// Throws ConfigError, naming the keys behind the larger part, when memory_floor(cfg) exceeds
/// `available_bytes` (the memory of `device`, named in the message); the trainer calls it before
/// any work.
void check_fits_memory(const RunConfig& cfg, double available_bytes, const std::string& device);

/// True for keys that change what a run records but not what it computes (track.*, eval.tasks,
/// eval.trigger_tokens and their items eval.tasks.N, eval.trigger_tokens.N): left out of
/// config_hash and allowed to differ when a run resumes.
bool is_observation_key(const std::string& key);

/// Stable 16-hex-digit hash of the resolved configuration (recorded in final.json), without out_dir,
/// the observation keys (track.*, eval.tasks, eval.trigger_tokens) and the GPT-NeoX model options at their defaults (added later: a
/// config that does not use them keeps the hash it had before they existed).
std::string config_hash(const RunConfig& cfg);

}  // namespace attnlab
