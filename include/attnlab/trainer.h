// One training run: YAML config -> run directory with metrics.jsonl, checkpoints and
// final.json. Every run is resumable (exactly, on the same build and device) and refuses to touch a
// directory that belongs to another run.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "attnlab/run_config.h"
#include "attnlab/self_check_record.h"

namespace attnlab {

class GPTImpl;
namespace signals {
class StopRequestScope;
}

struct TrainOptions {
  /// Start a new run from this checkpoint's full state (weights, optimizer, step, RNG), recording
  /// it as the parent (the keep/remove-decay branch of docs/retention.md). The run directory must be new.
  std::optional<std::filesystem::path> branch_from;
  /// Stop after this many optimizer steps in this session (tests: interrupt a run); 0 = no limit.
  int64_t stop_after_steps = 0;
  /// Data-parallel runs (docs/distributed.md): how long the rendezvous and any collective may wait
  /// for the other ranks before the job ends with an error instead of hanging.
  std::chrono::milliseconds collective_timeout{std::chrono::minutes(10)};
  /// Tests: called with the model and the 0-based step once its gradients are accumulated, before
  /// they are checked, clipped and applied (to plant a non-finite gradient or weight).
  std::function<void(GPTImpl& model, int64_t step)> after_backward;
  /// The first-use attention self-check (attention_self_check.h; docs/kernels.md) runs on CUDA before
  /// the first step, on every rank, and its result goes into final.json; on the CPU only when this is
  /// set (tests), so that a CPU run's outputs stay as they were.
  bool self_check_on_cpu = false;
  /// Tests: the check to run in its place (to plant a fault).
  SelfCheckRunner self_check;
};

enum class TrainStatus {
  finished,     ///< reached total_steps; final.json written
  interrupted,  ///< SIGINT / SIGTERM / stop_after_steps: checkpoint saved, resumable
};

struct TrainResult {
  TrainStatus status = TrainStatus::finished;
  int64_t step = 0;               ///< optimizer steps completed
  double final_val_loss = 0.0;    ///< nats/token (finished runs)
  std::filesystem::path run_dir;
  int signal = 0;                 ///< the signal that interrupted the run, if any
};

/// Error that stops a run without losing data (NaN loss, a foreign run directory, a config that
/// differs from the checkpoint's); the message says what to do.
struct TrainError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Catches SIGINT and SIGTERM from construction to destruction, so that one arriving while a run
/// starts (reading its config, opening data, loading a checkpoint) stops it the way one during
/// training does: train() returns TrainStatus::interrupted before its first step. train() holds one
/// itself; the train command opens one first thing, before reading the config. Scopes nest.
class StopSignalScope {
 public:
  StopSignalScope();
  ~StopSignalScope();
  StopSignalScope(const StopSignalScope&) = delete;
  StopSignalScope& operator=(const StopSignalScope&) = delete;

 private:
  std::unique_ptr<signals::StopRequestScope> scope_;
};

/// Trains `cfg` into cfg.out_dir: resumes from the newest good checkpoint there (refusing a config
/// that differs in anything but train.max_steps / train.token_budget, listing the keys), or starts
/// fresh. A finished run returns at once. When the torchrun environment names a job, this process
/// trains as one of its ranks (docs/distributed.md): rank 0 alone writes the run directory, and the
/// numbers are those of one process. Throws TrainError, ConfigError, DataError, CheckpointError,
/// dist::DistributedError; before the directory is claimed, AttentionSelfCheckError when the run's
/// attention fails its first-use self-check (the message names the setting that avoids its kernels)
/// and std::invalid_argument when its backend cannot serve the run (flash on CUDA in float32).
TrainResult train(const RunConfig& cfg, const TrainOptions& options = {});

}  // namespace attnlab
