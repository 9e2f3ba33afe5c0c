// Checkpoints of a training run (layout and formats in docs/checkpoints.md). Every function here
// takes a checkpoints root, the directory that holds them; which root a run has is the run
// directory's business (RunDir::checkpoints_path(), run_dir.h), and the trainer, import-hf and
// open_trained() reach checkpoints through RunDir and RunWriter:
//
//   <root>/step_000100/
//     model.safetensors      weights, named as GPTImpl::named_parameters() ("wte.weight", ...)
//     optimizer.safetensors  the optimizer's state per parameter: AdamW's "exp_avg.<name>",
//                            "exp_avg_sq.<name>", "step.<name>" (I64 scalar), "max_exp_avg_sq.<name>"
//                            (amsgrad only); SGD's and Muon's matrices' "momentum_buffer.<name>"
//     state.json             step, tokens, data position, losses, RNG states, resolved config,
//                            the trainer's fields (trainer_state.h), git revision, format version,
//                            SHA-256 of both tensor files
//     state.json.sha256      SHA-256 of state.json ("<hex>  state.json", as sha256sum prints it)
//
// A checkpoint appears under its final name only once every file is durable (written into a
// hidden sibling, fsynced, renamed), so a crash never leaves half a checkpoint there, and it never
// holds NaN or infinity. Loading verifies the checksums and every field; load_latest() skips a
// checkpoint that does not load (or fails the caller's check, e.g. check_restorable), saying so,
// and falls back to the previous good one. restore() makes training continue bit-identically
// (tested on CPU). docs/checkpoints.md states the integrity guarantees.
//
// One writer per root: save_checkpoint() removes hidden leftovers of crashed writes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/optim/optimizer.h>

#include "attnlab/checkpoint_error.h"
#include "attnlab/model.h"
#include "attnlab/run_config.h"
#include "attnlab/safetensors.h"
#include "attnlab/trainer_state.h"

namespace attnlab {

/// Version of the layout above, written as state.json's "format_version". A reader also accepts 1,
/// the layout before state.json.sha256 (its state.json is then checked field by field only).
inline constexpr int64_t kCheckpointFormatVersion = 2;

/// The bytes at::Generator::get_state() gives for every global generator.
struct RngStates {
  std::vector<uint8_t> cpu;                ///< the default CPU generator (mt19937 state)
  std::vector<std::vector<uint8_t>> cuda;  ///< the default generator of CUDA device i; empty without CUDA
};

/// The current state of the default CPU generator and, when CUDA is available, of each device's.
RngStates capture_rng_states();
/// Throws CheckpointError naming `origin` when restore_rng_states would refuse `states`: a state of
/// another size than its generator's here (CUDA states only for devices present), or a CPU state
/// whose mt19937 position lies outside its table. Changes nothing.
void check_rng_states(const RngStates& states, const std::filesystem::path& origin);
/// check_rng_states, then sets the generators captured above. A CUDA state is skipped (with a
/// warning) when its device is absent.
void restore_rng_states(const RngStates& states, const std::filesystem::path& origin);

/// What the trainer knows beyond the weights and the optimizer.
struct TrainState {
  int64_t step = 0;           ///< optimizer steps completed
  int64_t tokens_seen = 0;    ///< training tokens consumed
  int64_t data_position = 0;  ///< the sampler's position; today it equals `step` (batches are a
                              ///< pure function of (seed, step)), stored apart so that may change
  double val_loss = std::numeric_limits<double>::quiet_NaN();  ///< nats/token at this step; NaN = not evaluated
  double best_val_loss = std::numeric_limits<double>::infinity();  ///< lowest so far; +inf = none yet
  /// The run's resolved configuration (state.json's "config"); none for a checkpoint saved
  /// without one, written as {} (a model saved outside a run).
  std::optional<RunConfig> config;
  TrainerState trainer;  ///< state.json's "extra": elapsed time, a branch's parent, an import's source
  /// Filled by load_checkpoint(); save_checkpoint() ignores these and writes attnlab::git_revision()
  /// and capture_rng_states() of the moment of saving.
  std::string git_revision;
  RngStates rng;
};

/// Which checkpoints survive a save. The one just written is always among the last K.
struct RetentionPolicy {
  int64_t keep_last = 3;         ///< K >= 1 newest checkpoints
  bool keep_best = true;         ///< also the one with the lowest finite val_loss (earliest on ties)
  std::set<int64_t> keep_steps;  ///< also these steps (e.g. the log-spaced 1, 2, 4, ..., 512 that retention studies use)
  int64_t keep_every = 0;        ///< also every step divisible by this; 0 = off
};

struct CheckpointInfo {
  int64_t step;
  std::filesystem::path dir;
};

/// <root>/step_<step, zero-padded to at least 6 digits>
std::filesystem::path checkpoint_dir(const std::filesystem::path& root, int64_t step);
/// True when `dir` is a checkpoint directory: it holds state.json (whether or not that loads).
bool is_checkpoint_dir(const std::filesystem::path& dir);
/// True when the checkpoint directory `dir` holds optimizer.safetensors (import-hf's do not).
bool has_optimizer_state(const std::filesystem::path& dir);
/// The checkpoints under `root` by ascending step, from directory names only (nothing is validated;
/// hidden temporaries are ignored). Empty when there are none or `root` does not exist.
std::vector<CheckpointInfo> list_checkpoints(const std::filesystem::path& root);

/// Writes checkpoint `state.step` of `model` and `opt` (the trainer's optimizer on the model's
/// parameter groups: FusedAdamW, torch::optim::SGD or Muon, whose groups hold AdamWOptions or
/// SGDOptions, docs/checkpoints.md) atomically under `root` (created when missing), replacing an existing checkpoint of the
/// same step, then applies `policy`.
/// Returns the checkpoint directory. Throws FileError (CheckpointError among them) on I/O failure, when a weight or
/// optimizer tensor holds NaN or infinity, or when `state` breaks a rule of state.json
/// (docs/checkpoints.md: counts >= 0, tokens_seen >= step, losses >= 0, best_val_loss <= val_loss);
/// nothing under a final name is then changed. std::invalid_argument for policy.keep_last < 1.
std::filesystem::path save_checkpoint(const std::filesystem::path& root, const GPTImpl& model,
                                      const torch::optim::Optimizer& opt, const TrainState& state,
                                      const RetentionPolicy& policy = {});

/// The weights-only form of save_checkpoint (state.json and model.safetensors, no optimizer file), for
/// models that come without optimizer state (attnlab import-hf). Keeps every checkpoint under `root`.
/// What reads the optimizer (resuming, restore_optimizer, preconditioned retention) then refuses or
/// reports null, as for any checkpoint without optimizer.safetensors. Throws as save_checkpoint.
std::filesystem::path save_weights_checkpoint(const std::filesystem::path& root, const GPTImpl& model,
                                              const TrainState& state);

/// Deletes the checkpoints under `root` that `policy` does not keep, and never `just_saved`; returns their
/// steps. A checkpoint whose state.json cannot be read counts as having no val_loss.
/// save_checkpoint() calls this with the step it wrote (which need not be the newest: a corrupt
/// later checkpoint may remain from before a fallback resume, until its step is saved again).
std::vector<int64_t> apply_retention(const std::filesystem::path& root, const RetentionPolicy& policy,
                                     std::optional<int64_t> just_saved = std::nullopt);

/// One checkpoint read into memory (CPU tensors).
struct LoadedCheckpoint {
  std::filesystem::path dir;
  TrainState state;
  ModelConfig model_config;  ///< builds a model these weights fit
  TensorMap weights;         ///< by parameter name, dtype and shape as saved
  TensorMap optimizer;       ///< "exp_avg.<name>", ...; empty when loaded without the optimizer
  OptimizerName optimizer_name = OptimizerName::adamw;  ///< which optimizer wrote `optimizer`
  nlohmann::json optimizer_groups = nlohmann::json::array();  ///< per group: "params" (names), "lr",
                                                              ///< AdamW's "betas", "eps", "weight_decay", "amsgrad"
                                                              ///< or a momentum group's "momentum", "dampening",
                                                              ///< "nesterov", "weight_decay"
};

/// Reads and verifies the checkpoint in `ckpt_dir`: state.json against state.json.sha256, its
/// format version and fields (docs/checkpoints.md; "config" read as a RunConfig with its checks,
/// "extra" as a TrainerState), each tensor file's size and SHA-256 against
/// state.json, the safetensors structure. Without `with_optimizer` the optimizer file is neither
/// read nor verified. Throws CheckpointError naming the bad file and what is wrong with it.
LoadedCheckpoint load_checkpoint(const std::filesystem::path& ckpt_dir, bool with_optimizer = true);

/// A caller's test of a loaded checkpoint: throws CheckpointError to refuse it.
using CheckpointCheck = std::function<void(const LoadedCheckpoint&)>;

/// The newest checkpoint under `root` that loads and passes `check` (when given; e.g. one calling
/// check_restorable, so a checkpoint that cannot be restored is skipped like a corrupt one). Each
/// one skipped is logged (spdlog warning) and, if `warnings` is given, appended to it, naming the
/// checkpoint and why. std::nullopt when there is no checkpoint; throws CheckpointError naming
/// `root` and the newest one's problem when there are some but none is usable.
std::optional<LoadedCheckpoint> load_latest(const std::filesystem::path& root,
                                            std::vector<std::string>* warnings = nullptr, bool with_optimizer = true,
                                            const CheckpointCheck& check = {});

/// Throws the CheckpointError restore(ckpt, model, opt) would throw, changing nothing: the model
/// config; the weights' names, shapes, dtypes (the parameters') and finiteness; the optimizer's
/// groups and tensors (restore_optimizer); the RNG states (check_rng_states). Extra tensors are
/// refused, naming the first few.
void check_restorable(const LoadedCheckpoint& ckpt, const GPTImpl& model, const torch::optim::Optimizer& opt);

/// Copies the weights into `model`'s parameters in place (same tensors, so an optimizer built on
/// them stays valid). Throws CheckpointError, changing nothing, when the model config differs from
/// the checkpoint's, a parameter is missing, a tensor names no parameter, or a tensor's shape or
/// dtype differs from its parameter's or it holds NaN or infinity.
void restore_model(const LoadedCheckpoint& ckpt, GPTImpl& model);

/// Recreates the optimizer's per-parameter state (AdamW's step, exp_avg, exp_avg_sq,
/// max_exp_avg_sq; a momentum group's momentum_buffer) in `opt`, keyed as LibTorch keys it (the
/// parameter's TensorImpl), on each parameter's device and dtype, and sets each group's learning
/// rate (the schedule's position). Betas, eps, momentum and weight decay stay as `opt` was built, so
/// a branch run may change them. Throws CheckpointError, changing nothing, when the checkpoint has
/// no optimizer state, was written by another optimizer (naming both), its parameter groups differ
/// from `opt`'s, a tensor
/// is missing, left over, of another shape or dtype than its parameter, non-finite, or a second
/// moment or step count is out of range (step >= 1, exp_avg_sq >= 0).
void restore_optimizer(const LoadedCheckpoint& ckpt, const GPTImpl& model, torch::optim::Optimizer& opt);

/// check_restorable, then restore_model + restore_optimizer + restore_rng_states: training then
/// continues bit-identically. A refused checkpoint changes nothing.
void restore(const LoadedCheckpoint& ckpt, GPTImpl& model, torch::optim::Optimizer& opt);

/// A model rebuilt from a checkpoint for evaluation.
struct LoadedModel {
  GPT model{nullptr};
  ModelConfig model_config;
  std::optional<RunConfig> config;  ///< the run's resolved configuration; none when the checkpoint carries none
  TrainerState trainer;             ///< TrainState::trainer (e.g. a branch's parent); empty for a lone model file
  int64_t step = 0;
  std::filesystem::path source;  ///< the checkpoint directory or file actually read
};

/// The model of a loaded checkpoint, in eval mode, its weights checked as restore_model does.
/// Throws CheckpointError naming the model file.
LoadedModel load_model(const LoadedCheckpoint& ckpt);

/// `path` may be a checkpoint directory, its state.json, or a model.safetensors file (a run
/// directory is RunDir's to resolve: open_model() in trained_run.h). A model.safetensors with a
/// state.json beside it is read as that checkpoint (so its SHA-256 is verified); one alone
/// describes itself in its metadata, so it may be copied anywhere, but nothing records its
/// checksum there. The optimizer file is not read. Weights are checked as restore_model does.
/// Throws CheckpointError naming the file at fault when nothing there loads.
LoadedModel load_model(const std::filesystem::path& path);

}  // namespace attnlab
