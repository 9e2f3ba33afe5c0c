// What a training run trains, and where (internal to src/train): the device, the ranks, the model
// and its optimizer, the batches; and one optimizer step of them (SPEC sections 2, 6).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <torch/optim/optimizer.h>

#include "attnlab/batch_sampler.h"
#include "attnlab/distributed.h"
#include "attnlab/model.h"
#include "attnlab/run_config.h"
#include "attnlab/run_dir.h"
#include "attnlab/trainer.h"

namespace attnlab::training {

struct Trainee {
  c10::Device device{c10::kCPU};
  bool autocast = false;       ///< bf16 autocast (CUDA only)
  double peak_flops = 0.0;     ///< of the device, for MFU; 0 = unknown
  dist::DataParallel dp;       ///< this process's rank; a world of one unless launched as a rank
  int64_t micro_batches = 1;   ///< per rank and optimizer step
  GPT model{nullptr};
  std::unique_ptr<torch::optim::Optimizer> opt;  ///< optim.name's (optimizer_factory.h)
  std::vector<double> peak_lr;                    ///< of each of opt's groups, before the schedule
  std::unique_ptr<BatchSampler> sampler;
  std::shared_ptr<const ValidationSet> val;
  double data_seconds = 0.0;     ///< wall time spent fetching batches (final.json's time_s.data)
  double compute_seconds = 0.0;  ///< and in the rest of the steps (time_s.compute)
  std::optional<SelfCheckResult> self_check;  ///< the first-use attention self-check, where one ran
};

/// Checks `cfg` and the environment and builds everything a run needs before its directory is
/// claimed (so a refused start leaves nothing behind): the device, the ranks, the data, the model
/// initialised from cfg.effective_init_seed() on its device, the optimizer on its parameter groups, and the first-use
/// self-check of the run's attention on its device (TrainOptions::self_check_on_cpu).
Trainee make_trainee(const RunConfig& cfg, const TrainOptions& options);

/// What one optimizer step did.
struct StepOutcome {
  double loss = 0.0;       ///< training loss, nats/token, mean over micro-batches and ranks
  double grad_norm = 0.0;  ///< before clipping
  double lr = 0.0;         ///< the learning rate of optim.lr it used (Muon's matrices: of optim.muon_lr)
  double seconds = 0.0;    ///< wall time of the step
  double data_seconds = 0.0;  ///< of which fetching batches
};

/// Optimizer step `step` (0-based): accumulate gradients over the micro-batches, average over ranks,
/// clip, update; its time goes to t.data_seconds and t.compute_seconds. A non-finite loss or
/// gradient norm throws diverged() before the update.
StepOutcome train_step(Trainee& t, const RunConfig& cfg, int64_t step, const TrainOptions& options, const RunDir& run);

/// The error that stops a diverged run at `step` (1-based) before anything of that step is saved,
/// naming the newest checkpoint of `run`, which stays the last good one.
TrainError diverged(const RunDir& run, const std::string& what, int64_t step);

/// Model FLOPs utilisation of a step of `tokens` global tokens taking `seconds`, over every rank's
/// peak; none when the device's peak is unknown.
std::optional<double> model_flops_utilisation(const RunConfig& cfg, const Trainee& t, int64_t tokens, double seconds);

}  // namespace attnlab::training
