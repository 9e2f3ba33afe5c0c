// The training loop (SPEC sections 2, 3, 6). The loop only asks: each component owns its cadence and
// its part of the run (docs/design.md, "The trainer"): the trainee takes the optimizer steps
// (trainee.h), the evaluator measures the validation loss, the activation tracker probes, the
// checkpointer saves and prunes, the metrics logger writes metrics.jsonl and the progress line.
#include "attnlab/trainer.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "attnlab/activation_tracker.h"
#include "attnlab/checkpointer.h"
#include "attnlab/device.h"
#include "attnlab/evaluator.h"
#include "attnlab/metrics_logger.h"
#include "attnlab/progress.h"
#include "attnlab/version.h"
#include "common/signals.h"
#include "train/run_start.h"
#include "train/trainee.h"

namespace attnlab {
namespace {

using training::Run;
using training::Trainee;

// A run whose every step is done and whose final.json is there: nothing to do.
std::optional<TrainResult> already_finished(const RunConfig& cfg, const Run& r) {
  if (r.state.step < cfg.total_steps()) return std::nullopt;
  std::optional<FinalRecord> record;
  try {
    record = r.dir.final_record();
  } catch (const CheckpointError&) {
    throw;
  } catch (const FileError& e) {  // a damaged record stops the run like the trainer's own errors
    throw TrainError(e.what());
  }
  if (!record) return std::nullopt;
  spdlog::info("{}: already finished ({} steps)", r.dir.path().string(), r.state.step);
  return TrainResult{TrainStatus::finished, r.state.step, record->final_val_loss, r.dir.path()};
}

// Every rank checks that it holds rank 0's model, step, config and options (one that stopped alone
// would leave the others in a collective it never joins), then joins the gradient all-reduce.
void join_ranks(const RunConfig& cfg, const TrainOptions& options, Trainee& t, const Run& r) {
  t.dp.verify_identical(*t.model, {{"resume step", r.state.step},
                                   {"config hash", config_hash(cfg)},
                                   {"config", to_json(cfg)},
                                   {"--stop-after", options.stop_after_steps},
                                   {"--branch-from", options.branch_from ? options.branch_from->string() : ""}});
  t.dp.attach(*t.model);
}

// The signal any rank received (0: none), so that every rank stops at the same step.
int stop_signal(Trainee& t) { return static_cast<int>(t.dp.max(signals::stop_requested())); }

// A signal during the start-up (StopSignalScope) stops before the first step, on every rank.
std::optional<TrainResult> stopped_during_start_up(Trainee& t, const Run& r) {
  const int sig = stop_signal(t);
  if (sig == 0) return std::nullopt;
  spdlog::info("stopped before step {} (signal {}), during the start-up; nothing was trained, so nothing to save",
               r.state.step + 1, sig);
  return TrainResult{TrainStatus::interrupted, r.state.step, 0.0, r.dir.path(), sig};
}

void say_start(const RunConfig& cfg, const Trainee& t, const Run& r) {
  spdlog::info("train: steps {}..{} of {}, {} tokens/step ({} micro-batches of {}x{}{}), out {}", r.state.step + 1,
               cfg.total_steps(), cfg.total_steps(), cfg.effective_tokens_per_step(), t.micro_batches,
               cfg.train.batch_size, cfg.train.seq_len,
               t.dp.world_size() > 1 ? fmt::format(" on each of {} ranks", t.dp.world_size()) : "",
               r.dir.path().string());
}

// Step `step` (0-based) is done: the state moves on, and its record is filled but for val_loss.
StepRecord advance(const RunConfig& cfg, const Trainee& t, Run& r, const training::StepOutcome& out) {
  const int64_t tokens = cfg.effective_tokens_per_step();
  r.state.step += 1;
  r.state.tokens_seen += tokens;
  r.state.data_position = r.state.step;
  r.state.val_loss = std::numeric_limits<double>::quiet_NaN();
  StepRecord record{r.state.step, r.state.tokens_seen, out.loss, std::nullopt, out.lr, out.grad_norm,
                    tokens / out.seconds, r.elapsed()};
  record.mfu = training::model_flops_utilisation(cfg, t, tokens, out.seconds);
  return record;
}

// The validation loss now; a non-finite one stops the run before anything of this step is saved.
double checked_loss(Evaluator& evaluator, Trainee& t, const Run& r) {
  const double val = evaluator.evaluate(*t.model, t.dp);
  if (!std::isfinite(val)) throw training::diverged(r.dir, "validation loss", r.state.step);
  return val;
}

double evaluate(Evaluator& evaluator, Trainee& t, Run& r) {
  const double val = checked_loss(evaluator, t, r);
  r.state.val_loss = val;
  r.state.best_val_loss = std::min(r.state.best_val_loss, val);
  return val;
}

// Rank 0 writes; the others wait for it as long as it lives, outside any collective (a write slower
// than --dist-timeout must not fail the job: DataParallel::run_on_main).
void save(Checkpointer& checkpointer, MetricsLogger& logger, Trainee& t, Run& r) {
  const auto t0 = std::chrono::steady_clock::now();
  logger.sync();  // the log is durable up to the step a resume will start from
  checkpointer.add_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  r.state.trainer.elapsed_s = r.elapsed();
  t.dp.run_on_main(fmt::format("the checkpoint of step {}", r.state.step), [&] {
    if (r.writer) checkpointer.save(*r.writer, *t.model, *t.opt, r.state);
  });
}

TrainResult interrupted(Trainee& t, const Run& r, int signal) {
  t.dp.barrier();  // no rank exits (which would end a torchrun job) before the checkpoint is written
  spdlog::info("stopped at step {}{}; checkpoint saved, resume with the same command", r.state.step,
               signal ? fmt::format(" (signal {})", signal) : "");
  return {TrainStatus::interrupted, r.state.step, 0.0, r.dir.path(), signal};
}

struct Components {
  Evaluator& evaluator;
  ActivationTracker& tracker;
  Checkpointer& checkpointer;
  MetricsLogger& logger;
};

FinalRecord final_record(const RunConfig& cfg, const Trainee& t, const Run& r, const Components& c, double val_loss) {
  FinalRecord f;
  f.final_val_loss = val_loss;
  f.best_val_loss = r.state.best_val_loss;
  f.steps = r.state.step;
  f.tokens_seen = r.state.tokens_seen;
  f.params = count_params(cfg.model);
  f.wall_time_s = r.elapsed();
  f.git_revision = git_revision();
  f.config_hash = config_hash(cfg);
  f.arm = cfg.model.arm;
  f.seed = cfg.seed;
  f.tier = cfg.tier;
  f.device = device_name(t.device);
  f.world_size = t.dp.world_size();
  f.val_tokens = c.evaluator.validation().num_targets();
  f.val_fingerprint = c.evaluator.validation().fingerprint();
  f.time_s = {t.data_seconds,          t.compute_seconds,    c.evaluator.seconds(),
              c.checkpointer.seconds(), c.logger.seconds(), c.tracker.seconds()};
  f.parent = r.state.trainer.parent;
  f.attention_self_check = t.self_check;
  f.tasks = c.evaluator.last_tasks();  // of the last step's evaluation (or finish()'s own)
  if (const auto& d = c.evaluator.last_domains()) f.val_loss_trigger = d->trigger, f.val_loss_other = d->other;
  return f;
}

// The run has reached its last step: final.json (rank 0), once every rank is there.
TrainResult finish(const RunConfig& cfg, Trainee& t, const Run& r, const Components& c) {
  double val = c.evaluator.last_loss();
  if (std::isnan(val)) val = checked_loss(c.evaluator, t, r);  // a resume at the last step
  t.dp.run_on_main("final.json", [&] {  // the ranks leave together (run_on_main ends at a barrier)
    if (r.writer) r.writer->write_final(final_record(cfg, t, r, c, val));
  });
  spdlog::info("done: {} steps, final val loss {:.4f} nats/token, {}", r.state.step, val, format_duration(r.elapsed()));
  return {TrainStatus::finished, r.state.step, val, r.dir.path()};
}

}  // namespace

StopSignalScope::StopSignalScope() : scope_(std::make_unique<signals::StopRequestScope>()) {}
StopSignalScope::~StopSignalScope() = default;

TrainResult train(const RunConfig& cfg, const TrainOptions& options) {
  StopSignalScope stop_scope;  // first, so a SIGINT / SIGTERM during the start-up is honoured as one during training is
  // Everything that can refuse the input (data, model, the branch's source) runs before the directory
  // is claimed, so a failed start leaves no config.yaml that would refuse the corrected retry.
  Trainee t = training::make_trainee(cfg, options);
  Evaluator evaluator(cfg, t.val, t.device, t.autocast);
  ActivationTracker tracker(cfg, *t.val, t.device, t.dp.is_main());
  Checkpointer checkpointer(cfg.checkpoint);
  Run r = training::start_run(cfg, t, options);
  if (const auto done = already_finished(cfg, r)) return *done;
  join_ranks(cfg, options, t, r);
  MetricsLogger logger(cfg, r.open_metrics(), r.state.step);
  if (r.schedule_change) logger.log(*r.schedule_change);
  if (const auto stopped = stopped_during_start_up(t, r)) return *stopped;
  say_start(cfg, t, r);
  const int64_t first_step = r.state.step, total = cfg.total_steps();
  if (first_step == 0 && tracker.should_track(0, false)) logger.log(tracker.track(*t.model, 0));  // the initial state
  for (int64_t step = first_step; step < total; ++step) {
    StepRecord record = advance(cfg, t, r, training::train_step(t, cfg, step, options, r.dir));
    const bool last = r.state.step == total;
    if (evaluator.should_evaluate(r.state.step, last)) {
      record.val_loss = evaluate(evaluator, t, r);
      record.tasks = evaluator.last_tasks();
      if (const auto& d = evaluator.last_domains()) record.val_loss_trigger = d->trigger, record.val_loss_other = d->other;
    }
    logger.log(record);
    if (tracker.should_track(r.state.step, last)) logger.log(tracker.track(*t.model, r.state.step));
    logger.step_done(record, total, last);
    const int sig = stop_signal(t);
    const bool stop = sig != 0 || (options.stop_after_steps > 0 && r.state.step - first_step >= options.stop_after_steps);
    if (checkpointer.should_save(r.state.step, last, stop)) save(checkpointer, logger, t, r);
    if (stop && !last) return interrupted(t, r, sig);
  }
  return finish(cfg, t, r, {evaluator, tracker, checkpointer, logger});
}

}  // namespace attnlab
