// Claiming the run directory and resuming or branching (run_start.h).
#include "train/run_start.h"

#include <spdlog/spdlog.h>

#include "attnlab/lr_schedule.h"

namespace attnlab::training {
namespace fs = std::filesystem;
namespace {

// The run layer's errors (a foreign or damaged directory) stop a run like the trainer's own.
RunWriter claim(const RunDir& dir, const RunConfig& cfg, bool must_be_new) {
  try {
    return dir.claim(cfg, must_be_new);
  } catch (const FileError& e) {
    if (dynamic_cast<const CheckpointError*>(&e)) throw;
    throw TrainError(e.what());
  }
}

// The newest checkpoint of `source` (a run directory, or one checkpoint) that loads and restores
// into `t`; a damaged one is skipped for the one before it.
std::optional<LoadedCheckpoint> usable_checkpoint(const Trainee& t, const fs::path& source,
                                                  std::vector<std::string>* warnings) {
  const CheckpointCheck check = [&](const LoadedCheckpoint& c) { check_restorable(c, *t.model, *t.opt); };
  if (RunDir::is_run(source)) return RunDir(source).latest_checkpoint(warnings, true, check);
  if (!is_checkpoint_dir(source)) return std::nullopt;
  auto ckpt = load_run_checkpoint(source);
  check(ckpt);
  return ckpt;
}

// Continues from `ckpt`: its weights, optimizer state, RNG and counts, under this run's config.
void adopt(Run& r, Trainee& t, const RunConfig& cfg, const LoadedCheckpoint& ckpt) {
  restore(ckpt, *t.model, *t.opt);
  r.state = ckpt.state;
  r.state.config = cfg;
  r.elapsed_before = r.state.trainer.elapsed_s.value_or(0.0);
  r.resumed = true;
}

// A resume under another step budget re-shapes the cosine of the steps still to come: said in the
// log and recorded for metrics.jsonl, with the learning rate of the next step before and after.
std::optional<ScheduleChange> budget_change(const RunConfig& cfg, const LoadedCheckpoint& ckpt) {
  const int64_t before = ckpt.state.config->total_steps(), after = cfg.total_steps();
  if (before == after) return std::nullopt;
  const int64_t next = ckpt.state.step;  // 0-based index of the next step
  const double lr_before = learning_rate(cfg.optim, next, before), lr_after = learning_rate(cfg.optim, next, after);
  spdlog::warn(
      "resume: the step budget changed from {} to {} steps (train.max_steps / train.token_budget), so the "
      "learning-rate schedule of steps {}..{} is re-shaped: step {} gets lr {:.3e} instead of {:.3e}",
      before, after, next + 1, after, next + 1, lr_after, lr_before);
  return ScheduleChange{next, before, after, lr_before, lr_after};
}

// The run's own newest good checkpoint, when it may continue under `cfg`.
void resume(Run& r, Trainee& t, const RunConfig& cfg) {
  std::vector<std::string> warnings;
  auto ckpt = usable_checkpoint(t, r.dir.path(), &warnings);
  if (!ckpt) return;
  for (const auto& w : warnings) spdlog::warn("resume: {}", w);
  // The checkpoint is this run's (RunDir::check_own_checkpoint, against config.yaml, which claim()
  // has checked against `cfg`), so it records a config that `cfg` may continue.
  if (!ckpt->state.config) throw TrainError("cannot resume " + ckpt->dir.string() + ": the checkpoint records no run config");
  r.schedule_change = budget_change(cfg, *ckpt);
  adopt(r, t, cfg, *ckpt);
  spdlog::info("resume: from {} (step {})", ckpt->dir.string(), ckpt->state.step);
}

// A new run from another run's checkpoint, recorded as its parent; its time starts at 0.
void branch(Run& r, Trainee& t, const RunConfig& cfg, const fs::path& source) {
  auto ckpt = usable_checkpoint(t, source, nullptr);
  if (!ckpt) throw TrainError("--branch-from " + source.string() + ": no checkpoint there");
  adopt(r, t, cfg, *ckpt);
  r.state.trainer.parent = ParentRecord{ckpt->dir.string(), ckpt->state.step};
  r.elapsed_before = 0.0;
  spdlog::info("branch: starting from {} (step {})", ckpt->dir.string(), ckpt->state.step);
  const int64_t total = cfg.total_steps();
  if (r.state.step >= total)
    throw TrainError("--branch-from " + source.string() + ": the checkpoint is at step " +
                     std::to_string(r.state.step) + ", so a branch of " + std::to_string(total) +
                     " steps (train.max_steps / train.token_budget) has nothing to train");
}

}  // namespace

double Run::elapsed() const {
  return elapsed_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

std::optional<MetricsLog> Run::open_metrics() const {
  if (!writer) return std::nullopt;
  return writer->open_metrics(resumed ? state.step : -1);
}

Run start_run(const RunConfig& cfg, Trainee& t, const TrainOptions& options) {
  Run r{RunDir(cfg.out_dir)};
  r.state.config = cfg;
  if (options.branch_from) {
    branch(r, t, cfg, *options.branch_from);  // checked before the new directory is claimed
    if (t.dp.is_main()) r.writer = claim(r.dir, cfg, /*must_be_new=*/true);
  } else {
    if (t.dp.is_main()) r.writer = claim(r.dir, cfg, /*must_be_new=*/false);  // before its checkpoints are read
    resume(r, t, cfg);
  }
  return r;
}

}  // namespace attnlab::training
